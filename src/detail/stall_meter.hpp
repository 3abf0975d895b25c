// The I/O-free half of dlock::stall_monitor: given when each tick was due and
// when it ran, how late the loop was, which lateness is a stall, and the
// margin a hold keeps for stalls (the largest recent one, or the one going
// on now). Unit-tested without a timer (test/unit/stall_meter.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>

namespace dlock::detail {

class stall_meter {
 public:
  using clock = std::chrono::steady_clock;
  using duration = std::chrono::nanoseconds;

  stall_meter(duration period, duration threshold, duration memory) noexcept
      : period_(period), threshold_(threshold), memory_(memory) {}

  /// The tick due at `due` ran at `ran`: its lateness when that is a stall.
  std::optional<duration> on_tick(clock::time_point due, clock::time_point ran) {
    auto lag = ran - due;
    forget_before(ran - memory_);
    if (lag < threshold_) return std::nullopt;
    ++stalls_;
    last_stall_ = lag;
    recent_.push_back({ran, lag});
    return lag;
  }

  /// When the next tick is due: a period after this one ran, with no
  /// catching up (a stall is one late tick, not a burst of them).
  clock::time_point next_due(clock::time_point ran) const noexcept { return ran + period_; }

  /// The largest stall within `memory` of `now`, or, if larger, how overdue
  /// the tick due at `due` is at `now` (once that is a stall).
  duration margin(clock::time_point now, clock::time_point due) const noexcept {
    duration largest{0};
    for (const auto& s : recent_)
      if (s.at >= now - memory_ && s.lag > largest) largest = s.lag;
    auto overdue = now - due;
    if (overdue >= threshold_ && overdue > largest) largest = overdue;
    return largest;
  }

  duration last_stall() const noexcept { return last_stall_; }
  std::uint64_t stalls() const noexcept { return stalls_; }

 private:
  struct stall {
    clock::time_point at;
    duration lag;
  };

  void forget_before(clock::time_point oldest) {
    while (!recent_.empty() && recent_.front().at < oldest) recent_.pop_front();
  }

  duration period_, threshold_, memory_;
  std::deque<stall> recent_;  // stalls are rare: a handful at most
  duration last_stall_{0};
  std::uint64_t stalls_ = 0;
};

}  // namespace dlock::detail
