// One Redlock attempt as an I/O-free state machine. The Asio shell
// (src/redis/locks/acquire.cpp and engine.cpp) sends the commands, feeds the answers in here and
// does what the answers say; retry_schedule.hpp decides when to try again.
//
// An attempt ("round") asks every master at once to take (or extend) the key.
// It is won when a majority, N/2 + 1, said yes while time is left: the
// validity of timing.hpp, counted from `start`, read before the first
// command was sent. It is lost as soon as
// so many masters said no, failed or timed out that a majority is out of
// reach, or when the validity is gone. Either way the decision is taken the
// moment it is known; answers that come later are still recorded, and a
// late yes in a lost round tells the shell to release that master again.
//
// With fencing, each master also reports its fencing counter (after its
// increment, when it said yes; -1 when it has none). Every completed hold's
// token T was left on a majority W of counters (>= T). A round is then won
// only once the counters it saw cover a majority K too: K meets W, so the
// token, the largest counter seen (plus one for a master that said no), is
// larger than every earlier one. A master without a counter (new, or back
// from a restart without its data) is not counted in K: it is re-seeded by
// the write-back. Or every master answered: then no counter is unseen, and
// the largest is the last token (with none at all, the key is new: token
// 1). A master that failed, answered an error or timed out may hold the
// last token, so it never counts as empty. The shell writes the token back
// to the masters behind it, so that a majority holds it before the hold
// begins. The limit: a master that restarts without its data answers "no
// counter" truthfully; tokens go back only if every master that held the
// last token lost it (RELIABILITY.md, "Fencing tokens").
#pragma once

#include <dlock/config.hpp>
#include <dlock/observer.hpp>
#include <dlock/redis/detail/redlock_options.hpp>

#include "redis/locks/algorithm/timing.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <boost/container/small_vector.hpp>

#include <vector>

namespace dlock::redis::detail {

using redlock_clock = std::chrono::steady_clock;

/// What one master answered in one round.
enum class master_outcome : unsigned char {
  pending,       ///< no answer yet
  ok,            ///< the key was free and is now ours
  already_ours,  ///< the key already held our token (a late leftover); its TTL was refreshed
  taken,         ///< the key holds another token
  failed,        ///< connection or server error
  timed_out,     ///< no answer within the per-master timeout
};
const char* to_string(master_outcome outcome) noexcept;
/// "host:port=outcome ...", for logs (`masters` names them, in order).
std::string describe(std::span<const std::string> masters, std::span<const master_outcome> outcomes);

enum class round_state : unsigned char { pending, acquired, failed };

class redlock_round {
 public:
  redlock_round(std::size_t masters, std::chrono::milliseconds ttl, drift_rule drift,
                redlock_clock::time_point start, bool fencing = false);

  /// A master's answer without a fencing counter.
  static constexpr std::int64_t no_counter = -1;

  /// Records master `index`'s answer, received at `now`, and with fencing
  /// its counter. Returns the state after it. An answer after the decision
  /// never changes the decision.
  round_state record(std::size_t index, master_outcome outcome, redlock_clock::time_point now,
                     std::int64_t counter = no_counter);
  /// The per-master timeout passed at `now`: every pending master timed out.
  round_state time_out_pending(redlock_clock::time_point now);

  round_state state() const noexcept { return state_; }
  bool decided() const noexcept { return state_ != round_state::pending; }
  std::size_t masters() const noexcept { return slots_.size(); }
  std::size_t quorum() const noexcept { return slots_.size() / 2 + 1; }
  std::size_t count(master_outcome outcome) const noexcept;
  std::size_t ours() const noexcept;  ///< ok + already_ours
  bool all_answered() const noexcept { return count(master_outcome::pending) == 0; }

  redlock_clock::time_point start() const noexcept { return start_; }
  /// The drift allowance, rounded up to whole milliseconds.
  std::chrono::milliseconds drift() const noexcept;
  /// ttl - (now - start) - drift; zero or negative once expired.
  std::chrono::milliseconds validity(redlock_clock::time_point now) const noexcept;
  /// Validity at the moment of the decision (for logs and the caller).
  std::chrono::milliseconds validity_at_decision() const noexcept { return validity_at_decision_; }

  /// Why the round failed: `taken` when at least as many masters were held by
  /// others as failed or timed out; `no_quorum` otherwise; `expired` when a
  /// majority said yes but no validity was left. Empty unless failed.
  error_code failure() const noexcept { return failure_; }

  /// A failed round is cleaned up on every master: the ones that said yes,
  /// and also the failed, timed out and pending ones, since their SET may
  /// have landed without an answer reaching us.
  bool release_all() const noexcept { return state_ == round_state::failed; }
  /// True when master `index` said yes after the round had already failed:
  /// its key may have been set after the cleanup, so release it again.
  bool needs_late_release(std::size_t index) const noexcept;

  master_outcome outcome(std::size_t index) const noexcept { return slots_[index].outcome; }

  /// Fencing, once acquired: the hold's token.
  std::int64_t fencing_token() const noexcept { return fencing_token_; }
  /// Fencing, once acquired: masters whose counter already holds the token.
  std::size_t at_token() const noexcept;
  /// Fencing, once acquired: master `index` answered and its counter is
  /// below the token (or missing): the write-back should raise it.
  bool behind(std::size_t index) const noexcept;
  /// "ok taken timed_out ..." in master order, for logs and error messages.
  std::string describe() const;

 private:
  void decide(redlock_clock::time_point now);
  bool counted(std::size_t index) const noexcept;  // answered ok or taken
  struct counter_tally {
    std::size_t answered = 0, with_counter = 0;
  };
  counter_tally tally_counters() const noexcept;
  bool fencing_settled() const noexcept;
  bool fencing_reachable() const noexcept;
  std::int64_t token_from_counters() const noexcept;

  void set(master_outcome& slot, master_outcome outcome) noexcept;

  struct master_slot {
    master_outcome outcome = master_outcome::pending;
    bool late = false;  // answered after the decision
    std::int64_t counter = no_counter;  // with fencing
  };
  // What each answer reads first, the rest after: 64 clients' rounds in
  // flight must share the cache. Inline for up to 7 masters: a round per
  // attempt allocates nothing.
  round_state state_ = round_state::pending;
  bool fencing_;
  std::array<std::uint32_t, 6> tally_{};  // masters per outcome, kept with the slots
  redlock_clock::time_point start_;
  redlock_clock::time_point valid_until_;
  boost::container::small_vector<master_slot, 7> slots_;
  // Set at the decision (the token read again by fencing's late answers),
  // and the inputs it was computed from.
  std::int64_t fencing_token_ = 0;
  std::chrono::milliseconds validity_at_decision_{0};
  error_code failure_;
  std::chrono::milliseconds ttl_;
  drift_rule drift_;
};

/// What an observer is told of one Redlock round (acquire or extend), once it
/// settled: every master's vote, latency and error, and the decision
/// (dlock/observer.hpp, on_redlock_round); the masters that have not answered
/// by then timed out. Kept only when observed: otherwise it is one null
/// pointer, so that a round's own state stays small (64 clients' rounds must
/// fit the cache together).
class round_report {
 public:
  /// `observed`: a Redlock's with an observer (one server's rounds are not told).
  round_report(bool observed, const std::vector<std::string>& masters, round_kind kind);
  /// Master `index` answered at `now` (the first answer counts; a NOSCRIPT resend's does not).
  void answered(std::size_t index, master_outcome outcome, error_code ec, redlock_clock::time_point start,
                redlock_clock::time_point now);
  /// The per-master timeout passed at `now`: the masters that have not answered timed out.
  void time_out_pending(redlock_clock::time_point start, redlock_clock::time_point now);
  void decided(error_code decision, redlock_clock::time_point start, redlock_clock::time_point now);
  /// What to tell the observer, once (null: nothing, or told already).
  std::optional<dlock::redlock_round> settled(const lock_id& lock);

 private:
  struct votes {
    boost::container::small_vector<master_vote, 7> of_master;
    boost::container::small_vector<bool, 7> answered;
    round_kind kind;
    error_code decision;
    std::chrono::nanoseconds decided_after{};
    bool told = false;
  };
  std::unique_ptr<votes> votes_;
};

}  // namespace dlock::redis::detail
