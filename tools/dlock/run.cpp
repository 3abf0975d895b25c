#include "dlock/run.hpp"

#include "dlock/exit_status.hpp"

#include <dlock/log.hpp>

#include <iostream>
#include <string>

namespace dlock::cli {

void route_library_log(bool verbose) {
  dlock::set_log_handler([verbose](log_level level, std::string_view message) {
    // The ZooKeeper C client logs every refused connection attempt as an
    // error, several times a second: noise for a tool that reports the
    // outcome itself. Shown with -v.
    if (!verbose && message.starts_with("zookeeper: ")) return;
    std::string line = "dlock: ";
    if (level == log_level::warning || level == log_level::error) line += std::string(to_string(level)) + ": ";
    line += message;
    line += '\n';
    std::cerr << line << std::flush;
  }, verbose ? log_level::debug : log_level::warning);
}

void print_error(std::string_view message) { std::cerr << "dlock: " << message << std::endl; }

int status_for_exception(std::exception_ptr failure_ptr) {
  try {
    std::rethrow_exception(failure_ptr);
  } catch (const std::exception& e) {
    print_error(e.what());
  } catch (...) {
    print_error("unknown failure");
  }
  return exit_status::failed;
}

}  // namespace dlock::cli
