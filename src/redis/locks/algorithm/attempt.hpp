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

#include "redis/connection/connection_impl.hpp"  // inline_command, what a command is encoded into
#include "redis/locks/algorithm/round.hpp"

#include <dlock/observer.hpp>
#include <dlock/redis/reply.hpp>

#include <boost/container/small_vector.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::redis::detail {

/// The kinds of Redis hold the one lock shell (engine.hpp) drives.
enum class hold_kind : std::uint8_t { lock, fenced_lock, semaphore, redlock, fenced_redlock };

/// What a hold's answers mean: a few bytes, copied into each attempt, so
/// that reading an answer touches no memory of the lock's (with 64 rounds
/// in flight the lock's own lines are cold by the time its answers come).
class answer_reader {
 public:
  answer_reader(hold_kind what, int replicas) noexcept : what_(what), replicas_(replicas) {}

  /// One server: its error is the acquire's answer, and a broken attempt is
  /// not retried (a Redlock expects a broken minority and retries).
  bool one_server() const noexcept { return what_ != hold_kind::redlock && what_ != hold_kind::fenced_redlock; }
  bool fencing() const noexcept { return what_ == hold_kind::fenced_lock || what_ == hold_kind::fenced_redlock; }

  /// One master's answer to an attempt or an extension, as a round counts it.
  struct answer {
    master_outcome outcome = master_outcome::failed;
    std::int64_t counter = redlock_round::no_counter;  // fencing: the master's counter
    error_code error;  // why it failed (`outcome` failed), or `taken`
  };
  answer read_attempt(error_code ec, const reply& r) const;
  answer read_extend(error_code ec, const reply& r) const;
  /// With replica acknowledgement an answer is every reply gathered,
  /// [..., the command's answer, WAIT's count]: the command's own error (or
  /// `ec`), its answer, and the count (without: `ec`, `r` and no count).
  struct unwrapped {
    error_code ec;
    const reply* answer;
    std::int64_t acknowledged = -1;
  };
  unwrapped unwrap(error_code ec, const reply& r) const {
    return replicas_ > 0 && !ec ? unwrap_gathered(r) : unwrapped{ec, &r};
  }
  /// An unwrapped answer to an attempt or (`extend`) an extension.
  answer read(const unwrapped& own, bool extend) const;

  /// One server: what the attempt's answer means: empty when the hold is now
  /// ours (and, with fencing, `fencing_token` set), `taken`, or the error.
  error_code attempt_failure(error_code ec, const reply& r, std::int64_t& fencing_token) const;
  /// An attempt answered `ec` (or a reply that means `failure`) may still
  /// have taken the hold: it must be deleted by its token.
  bool attempt_may_have_landed(error_code ec, error_code failure) const;

 private:
  // The readers of a reply (not an error), without what WAIT acknowledged.
  answer read_one_server_attempt(const reply& r) const;
  answer read_redlock_attempt(const reply& r) const;
  answer read_extend_alone(const reply& r) const;
  answer acknowledged(answer a, std::int64_t replicas) const;
  unwrapped unwrap_gathered(const reply& r) const;

  hold_kind what_;
  int replicas_;  // lock_options::replicas; 0: no WAIT, answers not gathered
};

// What a Redis hold sends, for every kind the one lock shell (engine.hpp)
// drives: a lock on one server, a semaphore's lease, and a Redlock's key on
// each of its masters. The shell's steps are the same for all; only these
// commands and their reading (reader()) differ.
struct hold_commands {
  /// A lock on one server (SET NX PX; with `fencing`, in a MULTI block with INCR).
  static hold_commands lock(std::string key, bool fencing);
  /// One lease of a semaphore of `max_leases` kept in the sorted set `key`.
  static hold_commands semaphore(std::string key, std::size_t max_leases);
  /// A Redlock's key on each master (SET NX PX; with `fencing`, a script
  /// that also reports the master's counter).
  static hold_commands redlock(std::string key, bool fencing);

  using kind = hold_kind;

  /// Replica acknowledgement (lock_options::replicas): every attempt and
  /// extension is followed by WAIT `replicas` `timeout`.
  void wait_for_replicas(int replicas, std::chrono::milliseconds timeout);

  kind what = kind::lock;
  bool waits = false;  // for replicas (wait_for_replicas): answers are gathered
  std::string key;
  std::string counter_key;     // a fenced lock's counter, else empty
  std::size_t max_leases = 0;  // a semaphore's, else 0

  answer_reader reader() const noexcept { return {what, waits ? replicas_ : 0}; }
  bool one_server() const noexcept { return reader().one_server(); }
  bool fencing() const noexcept { return reader().fencing(); }

  /// Arguments no attempt can work with (an empty key, `ttl` <= 0, a semaphore of 0).
  error_code invalid(std::chrono::milliseconds ttl) const;

  /// One attempt to take the hold as `token` for `ttl`.
  void attempt(inline_command& out, std::string_view token, std::chrono::milliseconds ttl) const;
  /// Ends `token`'s hold, nobody else's: 1 when it was still ours.
  void release(inline_command& out, std::string_view token) const;
  /// Moves `token`'s expiry to `ttl` from now while it is still ours: 1 when so.
  void extend(inline_command& out, std::string_view token, std::chrono::milliseconds ttl) const;

 private:
  void attempt_alone(inline_command& out, std::string_view token, std::chrono::milliseconds ttl) const;

  int replicas_ = 0;           // lock_options::replicas
  std::string wait_replicas_;  // WAIT's arguments, when it waits
  std::string wait_timeout_;
};

class redlock_attempt {
 public:
  /// `commands` say what the answers mean; with fencing, an acquire counts
  /// the masters' counters.
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
  // What every answer reads first (64 clients' rounds in flight must share
  // the cache); what only a NOSCRIPT or one server's answer reads, last.
  answer_reader reader_;
  round_kind kind_;
  redlock_round round_;
  boost::container::small_vector<bool, 7> resent_;  // after NOSCRIPT, once per master
  error_code answered_error_;   // one server only: its answer's error, and the transport's
  error_code transport_error_;
  error_code write_back_failure_;
};

}  // namespace dlock::redis::detail
