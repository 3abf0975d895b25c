// dlock: run a command under a distributed lock, lead, or use a queue.
#include "dlock/child_process.hpp"
#include "dlock/command_line.hpp"
#include "dlock/commands.hpp"
#include "dlock/exit_status.hpp"

#include <iostream>

namespace dlock::cli {
namespace {

void print_tool_help() {
  std::cout << "Usage: dlock SUBCOMMAND [OPTIONS] ...   (dlock SUBCOMMAND --help for details)\n\n";
  for (const auto& command : subcommands) std::cout << "  " << command.usage << "\n      " << command.summary << "\n";
  std::cout << "\n" << exit_status::help_text();
}

int usage_failure(std::string_view problem, std::string_view usage) {
  std::cerr << "dlock: " << problem << " (usage: " << usage << ")" << std::endl;
  return exit_status::usage;
}

}  // namespace

const subcommand* find_subcommand(std::string_view name) {
  for (const auto& command : subcommands)
    if (command.name == name) return &command;
  return nullptr;
}

}  // namespace dlock::cli

int main(int argc, char** argv) {
  using namespace dlock::cli;
  remember_inherited_descriptors();
  constexpr std::string_view tool_usage = "dlock lock|elect|leader|queue ... or dlock --help";
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage_failure("missing subcommand", tool_usage);
  if (args.front() == "--help" || args.front() == "-h") {
    print_tool_help();
    return exit_status::success;
  }
  const subcommand* command = find_subcommand(args.front());
  if (!command) return usage_failure("unknown subcommand '" + args.front() + "'", tool_usage);
  try {
    return command->run(std::vector<std::string>(args.begin() + 1, args.end()));
  } catch (const usage_error& e) {
    return usage_failure(e.what(), command->usage);
  }
}
