#include <dlock/log.hpp>

#include <atomic>
#include <memory>
#include <mutex>

namespace dlock {
namespace {

struct log_state {
  std::mutex mutex;
  std::shared_ptr<const log_handler> handler;
  // Level below which nothing is formatted; above error means "off".
  std::atomic<int> min_level{static_cast<int>(log_level::error) + 1};
};

log_state& state() {
  static log_state s;
  return s;
}

}  // namespace

void set_log_handler(log_handler handler, log_level min_level) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  bool on = static_cast<bool>(handler);
  s.handler = on ? std::make_shared<const log_handler>(std::move(handler)) : nullptr;
  s.min_level = on ? static_cast<int>(min_level) : static_cast<int>(log_level::error) + 1;
}

std::string_view to_string(log_level level) noexcept {
  switch (level) {
    case log_level::debug: return "debug";
    case log_level::info: return "info";
    case log_level::warning: return "warning";
    case log_level::error: return "error";
  }
  return "unknown";
}

namespace detail {

bool log_enabled(log_level level) noexcept {
  return static_cast<int>(level) >= state().min_level.load(std::memory_order_relaxed);
}

void log(log_level level, std::string_view message) {
  if (!log_enabled(level)) return;
  std::shared_ptr<const log_handler> handler;
  {
    std::lock_guard lock(state().mutex);
    handler = state().handler;
  }
  if (handler) (*handler)(level, message);
}

}  // namespace detail
}  // namespace dlock
