// The shell of dlock::stall_monitor: the periodic timer that feeds the
// meter (stall_meter.hpp), and the locks subscribed to its stalls.
#pragma once

#include <dlock/error.hpp>
#include <dlock/stall_monitor.hpp>

#include "detail/stall_meter.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <map>
#include <mutex>
#include <utility>

namespace dlock::detail {

class stall_monitor_impl : public std::enable_shared_from_this<stall_monitor_impl> {
 public:
  /// Called on the monitor's executor with a stall's lateness.
  using subscriber = std::function<void(std::chrono::nanoseconds lag)>;

  stall_monitor_impl(asio::any_io_executor executor, stall_options options);

  void start();
  void stop();

  std::chrono::nanoseconds margin() const;
  std::chrono::nanoseconds last_stall() const;
  std::uint64_t stalls() const;

  /// Any thread; the id is for unsubscribe().
  std::uint64_t subscribe(subscriber s);
  void unsubscribe(std::uint64_t id);

 private:
  void arm(stall_meter::clock::time_point due);
  void on_tick();

  asio::steady_timer timer_;
  stall_options options_;
  mutable std::mutex mutex_;  // the meter, the due time and the subscribers
  stall_meter meter_;
  stall_meter::clock::time_point due_{};
  std::map<std::uint64_t, subscriber> subscribers_;
  std::uint64_t next_id_ = 1;
};

/// A subscription to a monitor's stalls (none without a monitor), ended when
/// reset or destroyed.
class stall_subscription {
 public:
  stall_subscription() = default;
  stall_subscription(const std::shared_ptr<stall_monitor>& monitor, stall_monitor_impl::subscriber s)
      : impl_(monitor ? monitor->impl() : nullptr), id_(impl_ ? impl_->subscribe(std::move(s)) : 0) {}
  ~stall_subscription() { reset(); }
  stall_subscription(stall_subscription&& other) noexcept
      : impl_(std::move(other.impl_)), id_(std::exchange(other.id_, 0)) {}
  stall_subscription& operator=(stall_subscription&& other) noexcept {
    if (this != &other) {
      reset();
      impl_ = std::move(other.impl_);
      id_ = std::exchange(other.id_, 0);
    }
    return *this;
  }

  void reset() noexcept {
    if (id_ == 0) return;
    try {
      impl_->unsubscribe(std::exchange(id_, 0));
    } catch (...) {  // a mutex that cannot lock: the subscriber is only ever called stale, and checks
    }
  }

 private:
  std::shared_ptr<stall_monitor_impl> impl_;
  std::uint64_t id_ = 0;
};

/// A ZooKeeper hold under loss_policy::standard: whether a stall of `lag`
/// counts as a suspension, `fraction` of the session timeout or more.
/// A ZooKeeper lock's `stall_fraction` must be in (0, 1]: zero or less would
/// lose every hold at the first stall, NaN none ever, and beyond 1 the
/// session may have expired before the stall counts.
inline bool valid_stall_fraction(double fraction) noexcept { return fraction > 0.0 && fraction <= 1.0; }

inline bool stall_suspends(std::chrono::nanoseconds lag, double fraction, std::chrono::milliseconds session_timeout) {
  return lag >= fraction * std::chrono::duration<double>(session_timeout);
}

/// A ZooKeeper hold (a lock's or a semaphore's core: its client `zk`, its
/// `strand`, `options.stall_fraction`, `lose()`) watching the client's stall
/// monitor: on the strand, a stall that suspends it while `holding(core)`
/// loses it with `dlock::error::stalled`.
template <class Core, class Holding>
stall_subscription suspend_on_stalls(const std::shared_ptr<stall_monitor>& monitor,
                                     const std::shared_ptr<Core>& core, Holding holding) {
  std::weak_ptr<Core> weak = core;
  return stall_subscription(monitor, [weak, holding, strand = core->strand](std::chrono::nanoseconds lag) {
    asio::dispatch(strand, [weak, holding, lag] {
      auto c = weak.lock();
      if (!c || !holding(*c)) return;
      if (stall_suspends(lag, c->options.stall_fraction, c->zk.negotiated_session_timeout()))
        c->lose(make_error_code(dlock::error::stalled));
    });
  });
}

}  // namespace dlock::detail
