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

#include "redis/locks/algorithm/retry_schedule.hpp"

#include <dlock/config.hpp>

#include <chrono>
#include <cstdint>

namespace dlock::redis::detail {

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
