// The one retry policy of the ZooKeeper recipes (locks, election, queue):
// which failures are retried, how many times, and how long to wait before
// each retry. I/O-free; every retry loop asks it instead of counting and
// computing a backoff of its own. The policy itself (a public option):
// <dlock/zk/detail/retry.hpp>.
#pragma once

#include <dlock/config.hpp>
#include <dlock/limits.hpp>
#include <dlock/zk/detail/retry.hpp>

#include <chrono>
#include <cstdint>
#include <limits>

namespace dlock::zk::detail {

/// A connection loss while the session may live: the C client reconnects on
/// its own, so the request can be sent again. Anything else (the session
/// expired, the client closed, a server's answer) is not retried.
bool is_retryable(const error_code& ec) noexcept;

/// A policy the recipes can follow: max_attempts not negative, backoffs from
/// zero to dlock::max_duration (a longer wait would overflow its timer's
/// nanoseconds). Recipes refuse others with dlock::error::invalid_argument.
inline bool valid_retry(const retry_policy& policy) noexcept {
  auto in_range = [](std::chrono::milliseconds d) { return d.count() >= 0 && d <= dlock::max_duration; };
  return policy.max_attempts >= 0 && in_range(policy.initial_backoff) && in_range(policy.max_backoff);
}

/// True when failure number `failures` (1 for the first) may still be retried.
inline bool may_retry(const retry_policy& policy, int failures) noexcept {
  return failures <= policy.max_attempts;
}

/// The nominal wait before retry number `retry` (1 for the first):
/// initial_backoff * 2^(retry-1), capped at max_backoff (never overflowing).
std::chrono::milliseconds backoff_delay(const retry_policy& policy, int retry) noexcept;

/// `delay` plus up to a quarter of itself, `random` picking where (any 32-bit
/// value, uniformly drawn): clients that lost the same server do not all
/// retry at the same instant. Never shorter than `delay`, so a retry budget
/// spans at least the time the nominal delays add up to.
std::chrono::milliseconds spread(std::chrono::milliseconds delay, std::uint32_t random) noexcept;

/// `spread(delay, r)` with `r` from a per-thread engine: the wait a shell sleeps.
std::chrono::milliseconds with_jitter(std::chrono::milliseconds delay);

/// Counts the failures of one retried step and says whether (and after how
/// long) to try it again: the one retry bookkeeping of the recipes' loops,
/// their state machines and the background removal of a node.
class retry_counter {
 public:
  explicit retry_counter(const retry_policy& policy) noexcept : policy_(policy) {}

  /// Records a failure with `ec`: true when the step should be tried again
  /// (a retryable error within the budget), after `delay()`.
  bool retry_after(const error_code& ec) noexcept { return is_retryable(ec) && count_failure(); }
  /// Records a failure the caller has judged retryable: true while within
  /// the budget. A step retried past it (a cleanup that goes on while the
  /// session lives) may go on counting: the count saturates, the delay stays
  /// at max_backoff.
  bool count_failure() noexcept {
    if (failures_ < std::numeric_limits<int>::max()) ++failures_;
    return may_retry(policy_, failures_);
  }
  /// A create that found its parent missing: true when the parent should be
  /// made and the create tried again. The first time is no failure (the
  /// recipes make their paths on demand, so `max_attempts` 0 must not refuse
  /// a fresh path); a parent missing again (a container reaped meanwhile)
  /// counts as one.
  bool retry_missing_parent() noexcept {
    if (!parent_made_) return parent_made_ = true;
    return count_failure();
  }
  /// The step made progress: the next failure is the first again.
  void reset() noexcept { failures_ = 0; }
  /// The nominal wait before the next try (after a failure was counted).
  std::chrono::milliseconds delay() const noexcept { return backoff_delay(policy_, failures_); }
  int failures() const noexcept { return failures_; }

 private:
  retry_policy policy_;
  int failures_ = 0;
  bool parent_made_ = false;  // retry_missing_parent() let one through
};

/// The pause of a recipe's state machine between a failed step and its next
/// try: the failures counted (retry_counter), how long to sleep, and the
/// step to resume when the sleep is over. Both sequential machines (the
/// locks' and the semaphore's) back off through it; each maps the step it
/// resumes back to its action.
template <class Step>
class retry_pause {
 public:
  explicit retry_pause(const retry_policy& policy) noexcept : retries_(policy), slowest_(policy.max_backoff) {}

  /// A retryable failure of `step`: true while within the budget, with the
  /// pause set to resume `step` after delay().
  bool after_failure(Step step) noexcept {
    if (!retries_.count_failure()) return false;
    set(retries_.delay(), step);
    return true;
  }
  /// The same for a step retried past the budget (the deletion of our own
  /// node, for as long as the session lives): the count saturates.
  void after_failure_regardless(Step step) noexcept {
    retries_.count_failure();
    set(retries_.delay(), step);
  }
  /// A background search's pace: the longest backoff, counting nothing.
  void at_slowest(Step step) noexcept { set(slowest_, step); }

  bool retry_missing_parent() noexcept { return retries_.retry_missing_parent(); }
  void reset() noexcept { retries_.reset(); }
  std::chrono::milliseconds delay() const noexcept { return delay_; }
  Step resumes() const noexcept { return step_; }

 private:
  void set(std::chrono::milliseconds delay, Step step) noexcept {
    delay_ = delay;
    step_ = step;
  }

  retry_counter retries_;
  std::chrono::milliseconds slowest_;
  std::chrono::milliseconds delay_{0};
  Step step_{};
};

}  // namespace dlock::zk::detail
