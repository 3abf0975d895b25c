// The two Redlock decisions taken by counting answers, besides the round's
// (round.hpp), I/O-free: a release's and a fencing write-back's. Each
// decides at the first answer that settles it; later answers change nothing.
#pragma once

#include "redis/locks/algorithm/replies.hpp"
#include "redis/locks/algorithm/round.hpp"

#include <dlock/error.hpp>

#include <boost/container/small_vector.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace dlock::redis::detail {

/// Compare-and-delete sent to `asked` of `masters` masters. A release of
/// every master is decided by the majority: released (the lock is free), or
/// so many said no or failed that a majority cannot have released.
/// A release of a subset (a background resend) is told once all answered.
/// One server (a lock's, a semaphore's): its own answer is the outcome (its
/// error, or `not_owned`), not `no_quorum`.
class release_tally {
 public:
  release_tally(std::size_t masters, std::size_t asked, bool one_server = false) noexcept
      : masters_(masters), asked_(asked), one_server_(one_server) {}

  /// The script did not run on a master (NOSCRIPT): send it there again
  /// (at most once per master asked, and not after the deadline).
  bool resend(error_code ec, bool deadline_passed) noexcept {
    if (!script_did_not_run(ec) || deadline_passed || resent_ >= asked_) return false;
    ++resent_;
    return true;
  }
  /// A master's answer: the release's outcome once it is known.
  std::optional<error_code> record(error_code ec, const reply& answer) {
    auto compared = ec ? ec : interpret_compare_script(answer);
    if (ec) ++broken_;
    else if (!compared) ++released_;
    else ++not_ours_;
    if (one_server_) return compared;
    std::size_t quorum = masters_ / 2 + 1;
    if (released_ >= quorum) return error_code();
    if (not_ours_ + broken_ > masters_ - quorum)
      return make_error_code(not_ours_ >= broken_ ? dlock::error::not_owned : dlock::error::no_quorum);
    return std::nullopt;
  }
  /// Every master asked answered or timed out (a subset's outcome).
  error_code all_answered() const { return released_ > 0 ? error_code() : make_error_code(dlock::error::not_owned); }
  std::size_t released() const noexcept { return released_; }

 private:
  std::size_t masters_, asked_;
  bool one_server_;
  std::size_t released_ = 0, not_ours_ = 0, broken_ = 0, resent_ = 0;
};

/// Step 4's write-back: max(counter, token) on the masters behind the token.
/// Succeeds once `needed` of them confirmed a counter at the token or
/// above; fails as soon as too few are left to confirm, or at the deadline.
class write_back_tally {
 public:
  write_back_tally(std::int64_t token, std::size_t needed, std::size_t asked) noexcept
      : token_(token), needed_(needed), asked_(asked) {}

  /// Before any answer: too few masters were asked (or none is needed).
  std::optional<error_code> at_start() const {
    if (asked_ < needed_) return make_error_code(dlock::error::no_quorum);
    return std::nullopt;
  }
  std::optional<error_code> record(error_code ec, const reply& answer) {
    auto counter = ec ? std::nullopt : integer_value(answer);
    if (counter && *counter >= token_) ++confirmed_;
    else ++failed_;
    if (confirmed_ >= needed_) return error_code();
    if (asked_ - failed_ < needed_) return make_error_code(dlock::error::no_quorum);
    return std::nullopt;
  }
  static error_code at_deadline() { return dlock::error::no_quorum; }

 private:
  std::int64_t token_;
  std::size_t needed_, asked_;
  std::size_t confirmed_ = 0, failed_ = 0;
};

/// A failover replaced masters under a hold (`replaced[i]`): it stands while
/// the masters that granted it (`granted[i]`, the last round's yes) and
/// were not replaced still make a majority (one server: that one). A
/// replica promoted in a master's place may lack the key.
inline bool stands_after_failover(std::span<const master_outcome> granted, std::span<const bool> replaced) {
  std::size_t standing = 0;
  for (std::size_t i = 0; i < granted.size(); ++i) {
    bool yes = granted[i] == master_outcome::ok || granted[i] == master_outcome::already_ours;
    if (yes && !replaced[i]) ++standing;
  }
  return standing >= granted.size() / 2 + 1;
}

/// Who granted a hold, master by master, for a failover's verdict: each
/// master's epoch (connection_impl::master_epoch) when the attempt went out,
/// and its answer in the last round decided, late yeses included. A hold
/// whose masters were replaced under it stands only as stands_after_failover says.
class grant_record {
 public:
  using epochs = boost::container::small_vector<std::uint64_t, 7>;

  void attempt_sent(const epochs& at_send) {
    masters_.resize(at_send.size());
    for (std::size_t i = 0; i < at_send.size(); ++i) masters_[i].at_attempt = at_send[i];
  }
  void hold_began() {
    for (auto& each : masters_) each.under_hold = each.at_attempt;
    holding_ = true;
  }
  /// Round `round` (a number the shell gives each) was decided, `decision`.
  void decided(std::uint64_t round, const redlock_round& decision) {
    round_ = round;
    masters_.resize(decision.masters());
    for (std::size_t i = 0; i < decision.masters(); ++i) masters_[i].outcome = decision.outcome(i);
  }
  /// A master of round `round` answered after the decision: counted if that
  /// round is still the last one decided.
  void answered_late(std::uint64_t round, std::size_t master, master_outcome outcome) {
    if (round == round_ && master < masters_.size()) masters_[master].outcome = outcome;
  }
  /// The masters' epochs are `now`: true when the hold no longer stands.
  bool lost_to_failover(std::span<const std::uint64_t> now) const {
    if (!holding_ || masters_.size() != now.size()) return false;
    bool any = false;
    for (std::size_t i = 0; i < now.size(); ++i) any = any || now[i] != masters_[i].under_hold;
    if (!any) return false;  // the common case
    boost::container::small_vector<bool, 7> replaced;
    for (std::size_t i = 0; i < now.size(); ++i) replaced.push_back(now[i] != masters_[i].under_hold);
    return !stands_after_failover(outcomes(), replaced);
  }
  boost::container::small_vector<master_outcome, 7> outcomes() const {
    boost::container::small_vector<master_outcome, 7> all;
    for (const auto& each : masters_) all.push_back(each.outcome);
    return all;
  }

 private:
  // One entry a master, so that one server's record is a cache line.
  struct per_master {
    std::uint64_t at_attempt = 0;  // its epoch when the last attempt went out
    std::uint64_t under_hold = 0;  // and when the hold began
    master_outcome outcome = master_outcome::pending;  // in the last round decided
  };
  std::uint64_t round_ = 0;
  bool holding_ = false;
  boost::container::small_vector<per_master, 7> masters_;
};

/// Fencing: a hold's token must be above every token this lock was given
/// before. One at or below the last went back: a failover lost counter
/// increments (replication is asynchronous). The counter is then raised
/// above it and the attempt taken again (RELIABILITY.md).
inline bool token_went_back(std::int64_t token, std::int64_t highest_given) noexcept {
  return token > 0 && token <= highest_given;
}

}  // namespace dlock::redis::detail
