// One Redlock round as the shell sees it, I/O-free: an acquire's SETs (or an
// extend's compare-and-PEXPIREs) on every master, decided by a
// redlock_round (round.hpp), and what each answer asks of the shell:
//
//   resend         the master did not run the script (its cache was flushed
//                  and the connection could not fall back to EVAL in order):
//                  send it again, once per master, before the deadline;
//   decided        this answer (or the deadline) decided the round;
//   raise_counter  fencing: a won round's master answered late with its
//                  counter behind the token: raise it, in the background;
//   release        an acquire's yes after the round failed: its key may have been set
//                  after the round's cleanup, so delete it there again.
//
// After a won fenced acquire, step 4 of the algorithm: the token is written
// back to the masters behind it (write_back_targets) and the hold begins
// once a majority holds it (write_back_tally, quorum.hpp; written_back).
#pragma once

#include "redis/locks/algorithm/round.hpp"

#include <dlock/observer.hpp>
#include <dlock/redis/reply.hpp>

#include <boost/container/small_vector.hpp>

namespace dlock::redis::detail {

struct hold_commands;

class redlock_attempt {
 public:
  /// `commands` (kept by reference) read the answers; with fencing, an
  /// acquire counts the masters' counters.
  redlock_attempt(const hold_commands& commands, round_kind kind, std::size_t masters,
                  std::chrono::milliseconds ttl, drift_rule drift, redlock_clock::time_point start);

  struct reaction {
    master_outcome outcome = master_outcome::pending;  // as recorded (pending: not recorded)
    bool resend = false;
    bool decided = false;
    bool raise_counter = false;
    bool release = false;
  };
  /// Master `index` answered at `now`. `deadline_passed`: its per-master
  /// timeout passed already (no resend then: the round is being settled).
  reaction on_answer(std::size_t index, error_code ec, const reply& answer, redlock_clock::time_point now,
                     bool deadline_passed);
  /// The per-master timeout passed at `now`: true when that decided the round.
  bool on_deadline(redlock_clock::time_point now);

  const redlock_round& round() const noexcept { return round_; }

  /// Step 4, once acquired with fencing: the masters to raise to the token,
  /// and how many of them must confirm before the hold begins (0: a
  /// majority holds it already; they are raised in the background).
  boost::container::small_vector<std::size_t, 7> write_back_targets() const;
  std::size_t write_back_needed() const noexcept;
  /// The write-back ended at `now` with `ec`; expired if the validity ran out meanwhile.
  void written_back(error_code ec, redlock_clock::time_point now);

  /// Won: the round, and with fencing the write-back, succeeded.
  bool won() const noexcept { return round_.state() == round_state::acquired && !write_back_failure_; }
  /// Why it was not won. One server: its own answer (the server's error,
  /// `taken`, an extension's `not_owned`), not `no_quorum`.
  error_code failure() const noexcept;
  /// A lost acquire's keys may be on a master though no yes was seen. A
  /// Redlock cleans every master up; one server only when its answer leaves
  /// doubt (a plain SET refused with an error did nothing).
  bool may_have_landed() const noexcept;
  /// An extension decided: empty `told` renews the hold (its yes came with
  /// validity left beyond `stall_margin`). Otherwise what its caller is
  /// told, why (for the observer), and whether the hold is lost: a Redlock's
  /// is (`lost`); one server's when its key is gone or the answer came too
  /// late (`not_owned`, `expired`), not when it merely failed to answer
  /// (the hold runs on to its validity).
  struct extend_verdict {
    error_code told;
    error_code why;
    bool loses = false;
  };
  extend_verdict extend_outcome(std::chrono::milliseconds stall_margin) const;

 private:
  redlock_round round_;
  const hold_commands* commands_;
  error_code answered_error_;   // one server: its answer's error, and the transport's
  error_code transport_error_;
  round_kind kind_;
  error_code write_back_failure_;
  boost::container::small_vector<bool, 7> resent_;  // after NOSCRIPT, once per master
};

}  // namespace dlock::redis::detail
