#include "dlock/command_line.hpp"

#include "dlock/commands.hpp"
#include "dlock/duration.hpp"

#include <dlock/zk/path.hpp>

#include <algorithm>
#include <iostream>

namespace dlock::cli {

void add_common_options(po::options_description& options) {
  options.add_options()
      ("help,h", "show this help and exit")
      ("verbose,v", "log the library's debug messages to stderr");
}

parsed_arguments parse_arguments(const std::vector<std::string>& args, const po::options_description& options,
                                 const po::positional_options_description& positionals, bool takes_command) {
  parsed_arguments out;
  auto end = args.end();
  if (takes_command) {
    end = std::find(args.begin(), args.end(), "--");
    if (end != args.end()) out.command.assign(end + 1, args.end());
  }
  try {
    std::vector<std::string> before(args.begin(), end);
    po::store(po::command_line_parser(before).options(options).positional(positionals).run(), out.values);
  } catch (const po::error& e) {
    throw usage_error(e.what());
  }
  out.help = out.values.count("help") > 0;
  if (takes_command && !out.help && out.command.empty()) throw usage_error("missing '-- CMD [ARGS...]'");
  return out;
}

std::optional<std::chrono::milliseconds> duration_option(const po::variables_map& values, const char* name) {
  auto text = string_option(values, name);
  if (!text) return std::nullopt;
  auto parsed = parse_duration(*text);
  if (!parsed) throw usage_error("--" + std::string(name) + ": '" + *text + "' is not a duration like 500ms, 30s, 2m, 1h");
  return parsed;
}

std::optional<std::string> string_option(const po::variables_map& values, const char* name) {
  if (!values.count(name)) return std::nullopt;
  return values[name].as<std::string>();
}

void require_zk_path(const std::string& path) {
  if (path == "/") throw usage_error("PATH: not the root");
  if (auto problem = zk::path_problem(path); !problem.empty()) throw usage_error("PATH: " + std::string(problem));
}

std::string required_string(const po::variables_map& values, const char* name, const char* missing) {
  auto value = string_option(values, name);
  if (!value || value->empty()) throw usage_error(missing);
  return *value;
}

void print_help(const std::string& usage, const po::options_description& options, std::string_view footer) {
  std::cout << "Usage: " << usage << "\n\n" << options << "\n" << footer;
}

std::optional<parsed_arguments> parse_or_print_help(const std::vector<std::string>& args, std::string_view subcommand,
                                                    const po::options_description& options,
                                                    std::initializer_list<const char*> positionals, bool takes_command,
                                                    std::string_view footer) {
  po::positional_options_description order;
  for (const char* name : positionals) order.add(name, 1);
  auto parsed = parse_arguments(args, options, order, takes_command);
  if (!parsed.help) return parsed;
  print_help(std::string(find_subcommand(subcommand)->usage), options, footer);
  return std::nullopt;
}

}  // namespace dlock::cli
