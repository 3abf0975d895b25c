// What an observer is told of each Redlock round: every master's vote,
// latency and error, and the decision (dlock/observer.hpp, on_redlock_round).
#pragma once

#include "redis/locks/algorithm/round.hpp"

#include <dlock/observer.hpp>

#include <boost/container/small_vector.hpp>

#include <memory>

namespace dlock::redis::detail {

class lock_engine;

/// What the observer is told of one round (acquire or extend), once it
/// settled: every master answered or timed out. Kept only when observed:
/// otherwise it is one null pointer, so that a round's own state stays small
/// (64 clients' rounds must fit the cache together).
class round_report {
 public:
  round_report(const lock_engine& owner, round_kind kind);
  /// Master `index` answered (the first answer counts; a NOSCRIPT resend's does not).
  void answered(std::size_t index, master_outcome outcome, error_code ec, redlock_clock::time_point start);
  /// The per-master timeout passed: the masters that have not answered timed out.
  void time_out_pending(redlock_clock::time_point start);
  void decided(error_code decision, redlock_clock::time_point start);
  /// Tells the observer (once).
  void settled(const lock_engine& owner);

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
