// Auto-extension of a held Redis lock (one master or many): extend every
// ttl * fraction, optionally up to a cap on the total hold, and report the
// first extension that fails. The hold (hold.hpp) owns one and watches the
// validity itself: an extension that comes too late is a loss there.
#pragma once

#include <dlock/config.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <memory>

namespace dlock::redis::detail {

using steady_clock = std::chrono::steady_clock;

struct auto_extend_settings {
  std::chrono::milliseconds ttl{0};  ///< the TTL each extension sets
  double fraction = 1.0 / 3;         ///< extend every ttl * fraction (Redisson: 1/3)
  std::chrono::milliseconds max_hold{0};  ///< no extension past acquired + max_hold (0: no cap)
};

/// Runs on the lock's executor; every member is called there. One hold at a
/// time: start() after acquisition, stop() before release.
class auto_extender {
 public:
  /// One extension: sends it, renews the hold on success, reports; must not throw.
  using step_function = std::function<asio::awaitable<error_code>()>;
  /// Told the error of the first extension that failed (not after stop()).
  using failure_function = std::function<void(error_code)>;

  explicit auto_extender(asio::any_io_executor executor);
  ~auto_extender();  ///< stops without waiting; reports nothing afterwards
  auto_extender(const auto_extender&) = delete;
  auto_extender& operator=(const auto_extender&) = delete;

  /// Begins extending a hold acquired at `acquired`. A previous run must have been stopped.
  void start(auto_extend_settings settings, steady_clock::time_point acquired, step_function step,
             failure_function failed);

  /// Ends the current run: no extension is sent after this; completes once an
  /// extension in flight has finished (at once if none). `void(error_code)`,
  /// always success. Call it and wait before deleting the key.
  template <class Token = default_token>
  auto stop(Token&& token = {}) {
    return asio::async_initiate<Token, void(error_code)>(
        [this](auto handler) { start_stop(asio::any_completion_handler<void(error_code)>(std::move(handler))); },
        token);
  }

  bool running() const noexcept;
  /// Successful extensions in the current run.
  std::uint64_t extensions() const noexcept;

  struct state;

 private:
  void start_stop(asio::any_completion_handler<void(error_code)> handler);

  std::shared_ptr<state> state_;  // first: running() is read at every hold's end
  asio::any_io_executor executor_;
};

}  // namespace dlock::redis::detail
