// One acquire of a Redis lock, one master or many, as an I/O-free state
// machine: it says what to do next, the Asio shell does it and reports back.
//
//   start ──> [wait for cleanups] ──> attempt ──won──────────────> complete(ok)
//                    ^                   │
//                    │               lost │ delete the attempt's keys if
//                    │                   v  they may be there
//                    └──── pause <── retry? ──no──> complete(why)
//
// An attempt is one SET NX PX per master (decided by a round, round.hpp, on
// Redlock; by the one reply on a single instance). No attempt is sent while
// an earlier cleanup is unanswered: a cleanup that runs late (after a
// NOSCRIPT round trip, say) must never meet the next attempt's keys.
// What a lost attempt means:
//   taken      another client holds the key: retried per the schedule; a
//              wait that runs out is `timed_out`, a try_acquire `taken`;
//   expired    won, but the validity left at the decision (ttl less the time
//              since the send, the drift and the stall margin) is not
//              positive: the key may already be another client's, so the
//              attempt is never held; it is deleted, like every lost one;
//   otherwise  (no quorum, a connection or server error): retried on
//              Redlock, where a minority of broken masters is expected; the
//              acquire's error on a single instance (an expired one too).
#pragma once

#include <dlock/config.hpp>
#include <dlock/redis/detail/redlock_options.hpp>

#include <chrono>
#include <cstdint>
#include <optional>

namespace dlock::redis::detail {

// When a Redis lock tries again after a failed attempt, and when it gives
// up: every Redis lock, one master or many, follows this schedule.
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
  /// An acquire's schedule: the options' (`retry_count`, `wait_limit`), or
  /// acquire_for(`wait`)'s: retry until the wait ends, whatever the options
  /// say. A wait not in (0, max_duration] gets no deadline (the acquire
  /// refuses it), so it is never added to the clock, where it would overflow.
  /// `now` is called only for a deadline (most acquires have none).
  static retry_schedule for_acquire(const redlock_options& options, std::optional<std::chrono::milliseconds> wait,
                                    clock::time_point (*now)()) noexcept;
  int attempts() const noexcept { return attempts_; }

 private:
  int retries_;
  std::chrono::milliseconds delay_;
  std::chrono::milliseconds jitter_;
  std::optional<clock::time_point> deadline_;
  int attempts_ = 1;  // the first attempt has been made when next() is asked
};


/// Where a lock's hold is: none, held, or lost (release() is still to tell why).
enum class hold_phase : std::uint8_t { idle, held, lost };

/// A lock as the shell sees it when a user calls it: what decides whether
/// the call is refused at once, and how a release() goes.
struct lock_status {
  hold_phase hold = hold_phase::idle;
  bool acquiring = false;  ///< an acquire has not completed yet
  bool releasing = false;  ///< a release() has not completed yet
  bool released = false;   ///< the last hold was released: release() again succeeds
  bool every_master_closed = false;  ///< closed for good: nothing can be sent
  bool one_server = true;
  bool invalid_arguments = false;  ///< the lock's own: every acquire is refused
};

/// Why acquire() (acquire_for(`wait`)) is refused at once (empty: it goes
/// ahead). One server: a lost hold must be released first, which tells the
/// loss's reason.
error_code acquire_refusal(const lock_status& lock, std::optional<std::chrono::milliseconds> wait) noexcept;
/// Why a hold cannot be extended now: `lost`, or `not_held` (empty: it can).
error_code extend_refusal(const lock_status& lock) noexcept;

/// What release() does: tell `told` at once (after ending a lost hold,
/// whose keys were deleted at the loss, or one whose masters are all
/// closed, whose keys go with their ttl), or send the deletes.
struct release_plan {
  enum class step : std::uint8_t { tell, end_and_tell, send } what = step::send;
  error_code told;
  bool tell_loss = false;  ///< told: the loss's reason
};
release_plan plan_release(const lock_status& lock) noexcept;

struct acquire_policy {
  bool retry = true;              ///< false for try_acquire: one attempt
  bool retry_when_broken = true;  ///< Redlock: retry a failure that is not `taken`
};

struct acquire_action {
  enum class kind : std::uint8_t {
    none,               ///< nothing to do (a stale event)
    send_attempt,       ///< send the next attempt (a fresh token)
    wait_for_cleanups,  ///< call cleanups_settled() once none is in flight
    pause,              ///< wait `pause`, then call pause_over()
    complete,           ///< complete the acquire with `result`
  };
  kind what = kind::none;
  std::chrono::milliseconds pause{0};
  error_code result;
  /// Before acting: delete the last attempt's keys (compare-and-delete of its
  /// token, in the background): a SET may have landed without a yes seen.
  bool delete_attempt = false;

  static acquire_action make(kind what, error_code result = {}, bool delete_attempt = false) noexcept {
    acquire_action action;
    action.what = what;
    action.result = result;
    action.delete_attempt = delete_attempt;
    return action;
  }
};

class acquire_machine {
 public:
  using clock = std::chrono::steady_clock;

  acquire_machine(acquire_policy policy, retry_schedule schedule) noexcept
      : policy_(policy), schedule_(schedule) {}

  acquire_action start(bool cleanups_in_flight) noexcept;
  acquire_action cleanups_settled() noexcept;
  /// The attempt was decided: `failure` empty when won. `may_have_landed`:
  /// its keys may be on a master though no yes was seen. `validity_left`:
  /// what a won attempt's hold would have left now (signed, already less the
  /// drift and the stall margin); a win at zero or less is `expired`.
  acquire_action attempt_decided(error_code failure, bool may_have_landed, std::chrono::milliseconds validity_left,
                                 clock::time_point now, double random) noexcept;
  acquire_action pause_over(bool cleanups_in_flight) noexcept;
  /// Cancelled, or the lock destroyed: an attempt out is abandoned and deleted.
  acquire_action cancel() noexcept;

  bool done() const noexcept { return step_ == step::done; }
  bool attempting() const noexcept { return step_ == step::attempting; }
  int attempts() const noexcept { return schedule_.attempts(); }
  const acquire_policy& policy() const noexcept { return policy_; }

 private:
  enum class step : std::uint8_t { idle, waiting_for_cleanups, attempting, pausing, done };
  acquire_action next_attempt(bool cleanups_in_flight) noexcept;
  acquire_action complete(error_code result, bool delete_attempt = false) noexcept;

  acquire_policy policy_;
  retry_schedule schedule_;
  step step_ = step::idle;
};

}  // namespace dlock::redis::detail
