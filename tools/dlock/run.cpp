#include "dlock/run.hpp"

#include "dlock/exit_status.hpp"

#include <dlock/log.hpp>

#include <iostream>
#include <string>
#include <vector>

namespace dlock::cli {
namespace {

std::vector<std::shared_ptr<void>>& kept_objects() {
  static std::vector<std::shared_ptr<void>> objects;
  return objects;
}

}  // namespace

void keep_until_drained(std::shared_ptr<void> object) { kept_objects().push_back(std::move(object)); }

void destroy_kept_objects() {
  // Newest first, as scopes would: connections go before what they served.
  while (!kept_objects().empty()) kept_objects().pop_back();
}

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
