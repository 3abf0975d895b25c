// When a Redis lock tries again after a failed attempt, and when it gives
// up: every Redis lock, one master or many, follows this schedule.
#pragma once

#include <chrono>
#include <optional>

namespace dlock::redis::detail {

class retry_schedule {
 public:
  using clock = std::chrono::steady_clock;

  /// `retries`: attempts after the first, -1 for no limit but the deadline.
  /// Pauses are `delay` +- a uniform `jitter`, never negative. No attempt
  /// starts at or after `deadline`.
  retry_schedule(int retries, std::chrono::milliseconds delay, std::chrono::milliseconds jitter,
                 std::optional<clock::time_point> deadline) noexcept;

  /// After a failed attempt, at `now`: the pause before the next attempt, or
  /// nothing when the retries or the time ran out. `random` is uniform in
  /// [0, 1) and picks the jitter.
  std::optional<std::chrono::milliseconds> next(clock::time_point now, double random) noexcept;
  int attempts() const noexcept { return attempts_; }

 private:
  int retries_;
  std::chrono::milliseconds delay_;
  std::chrono::milliseconds jitter_;
  std::optional<clock::time_point> deadline_;
  int attempts_ = 1;  // the first attempt has been made when next() is asked
};

}  // namespace dlock::redis::detail
