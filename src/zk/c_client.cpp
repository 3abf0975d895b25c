#include "c_client.hpp"

#include <dlock/log.hpp>

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::zk::detail {
namespace {

std::mutex& c_client_mutex() {
  static std::mutex m;
  return m;
}

// Lines logged by the C client during the current guarded call (one thread
// holds the mutex at a time, so the buffer lives with the mutex).
std::vector<std::string>& pending_lines() {
  static std::vector<std::string> lines;
  return lines;
}

log_level level_of(std::string_view line) {
  if (line.find("ZOO_ERROR") != std::string_view::npos) return log_level::error;
  if (line.find("ZOO_WARN") != std::string_view::npos) return log_level::warning;
  if (line.find("ZOO_INFO") != std::string_view::npos) return log_level::info;
  return log_level::debug;
}

}  // namespace

c_call_guard::c_call_guard() { c_client_mutex().lock(); }

c_call_guard::~c_call_guard() {
  std::vector<std::string> lines;
  if (!pending_lines().empty()) lines.swap(pending_lines());
  c_client_mutex().unlock();
  for (auto& line : lines) {
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    dlock::detail::log(level_of(line), "zookeeper: " + line);
  }
}

extern "C" void c_client_log(const char* message) {
  // Runs inside a C client call, with the mutex held: only record.
  if (message) pending_lines().emplace_back(message);
}

void configure_c_client_logging() {
  ZooLogLevel level = ZOO_LOG_LEVEL_ERROR;
  if (dlock::detail::log_enabled(log_level::debug)) level = ZOO_LOG_LEVEL_DEBUG;
  else if (dlock::detail::log_enabled(log_level::info)) level = ZOO_LOG_LEVEL_INFO;
  else if (dlock::detail::log_enabled(log_level::warning)) level = ZOO_LOG_LEVEL_WARN;
  std::lock_guard lock(c_client_mutex());
  zoo_set_debug_level(level);
}

}  // namespace dlock::zk::detail
