/// @file
/// Stall detection: how late the event loop runs its timers.
///
/// A stall (a long handler, a page-fault storm, a paused VM) eats a lock's
/// validity while nobody looks: the holder's own timers, its validity watch
/// among them, run only once the stall is over. A `stall_monitor` runs a
/// timer every `period` and measures how late it fires. Install it in a
/// Redis connection's or a ZooKeeper client's options (`stall`), and their
/// locks act on what it sees:
/// - a Redis hold subtracts the lateness seen recently from its validity, and
///   is lost (`dlock::error::stalled`) as soon as a stall leaves it less
///   validity than the stall lasted, before its validity would have run out
///   by the clock;
/// - a ZooKeeper lock under `loss_policy::standard` treats a stall longer
///   than `stall_fraction` of the session timeout as a suspension: lost
///   (`dlock::error::stalled`), since the session may have gone while nobody
///   looked.
///
/// Run it on the executor the locks run on (one per io_context), and destroy
/// it there (or after the io_context stopped).
#pragma once

#include <dlock/config.hpp>
#include <dlock/observer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace dlock {

/// How a stall_monitor looks. Every value is taken, brought into range: a
/// `period` and `threshold` of at least 1 ms, none beyond
/// `dlock::max_duration`, a `memory` of at least 0.
struct stall_options {
  /// How often it looks: the timer's period.
  std::chrono::milliseconds period{20};
  /// A timer late by at least this is a stall (told to the observer and the locks).
  std::chrono::milliseconds threshold{50};
  /// How long a stall's lateness counts in `margin()`.
  std::chrono::milliseconds memory{60'000};
  /// Told of each stall (`observer::on_stall`), on the monitor's executor.
  std::shared_ptr<dlock::observer> observer{};
};

namespace detail {
class stall_monitor_impl;
}

/// Measures how late the event loop runs a periodic timer, and tells the
/// locks that use it (through their client's or connection's options).
class stall_monitor {
 public:
  /// Starts looking at once, on `executor`.
  explicit stall_monitor(asio::any_io_executor executor, stall_options options = {});
  /// Stops looking.
  ~stall_monitor();
  stall_monitor(const stall_monitor&) = delete;
  stall_monitor& operator=(const stall_monitor&) = delete;

  /// The largest lateness seen within `memory`, and how overdue the timer is
  /// now (a stall still going on, or just over, that the timer has not run
  /// after yet). Any thread.
  std::chrono::nanoseconds margin() const noexcept;
  /// The lateness of the last stall (zero before the first). Any thread.
  std::chrono::nanoseconds last_stall() const noexcept;
  /// Stalls seen so far. Any thread.
  std::uint64_t stalls() const noexcept;

  /// Internal: the locks' subscription to stalls.
  const std::shared_ptr<detail::stall_monitor_impl>& impl() const noexcept { return impl_; }

 private:
  std::shared_ptr<detail::stall_monitor_impl> impl_;
};

}  // namespace dlock
