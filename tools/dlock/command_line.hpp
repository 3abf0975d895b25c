// Parsing a subcommand's arguments with Boost.Program_options.
#pragma once

#include <boost/program_options.hpp>

#include <chrono>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::cli {

namespace po = boost::program_options;

/// Bad arguments: main() prints "dlock: <what>" and the subcommand's usage
/// line on one line, and exits 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A subcommand's arguments: the options and positionals before "--", and
/// the command after it (for subcommands that run one).
struct parsed_arguments {
  po::variables_map values;
  std::vector<std::string> command;
  bool help = false;
};

/// Options every subcommand takes: -h/--help, -v/--verbose.
void add_common_options(po::options_description& options);

/// Parses `args`. With `takes_command`, everything after the first "--" is
/// the command (required unless --help). Throws usage_error.
parsed_arguments parse_arguments(const std::vector<std::string>& args, const po::options_description& options,
                                 const po::positional_options_description& positionals, bool takes_command);

/// The value of duration option `name` (e.g. "30s"), or nullopt if absent. Throws usage_error.
std::optional<std::chrono::milliseconds> duration_option(const po::variables_map& values, const char* name);
/// The value of string option `name`, or nullopt if absent.
std::optional<std::string> string_option(const po::variables_map& values, const char* name);
/// The value of string option or positional `name`; usage_error `missing` if absent.
std::string required_string(const po::variables_map& values, const char* name, const char* missing);

/// Throws usage_error unless `path` is a valid ZooKeeper path for a lock,
/// election or queue (the library's own rule, zk::path_problem, and not "/").
void require_zk_path(const std::string& path);

/// Prints `usage`, the options and (when given) `footer` to stdout for --help.
void print_help(const std::string& usage, const po::options_description& options, std::string_view footer = {});

/// A subcommand's arguments as parse_arguments reads them (`positionals`
/// are one value each, in order), or nullopt after --help printed the
/// subcommand's usage, the options and `footer`.
std::optional<parsed_arguments> parse_or_print_help(const std::vector<std::string>& args, std::string_view subcommand,
                                                    const po::options_description& options,
                                                    std::initializer_list<const char*> positionals, bool takes_command,
                                                    std::string_view footer);

}  // namespace dlock::cli
