// A lock's background deletes, I/O-free: how many are in flight, who waits
// for none to be (no SET is sent meanwhile: acquire_machine.hpp), and the
// ones that failed on a master. Such a
// delete (its connection was down, or it timed out) may have left that
// attempt's key there, which would make our own next SET see "taken" until
// the TTL. It is sent again right before the next SET on that master's
// connection (one connection's commands run in order), until the key's TTL
// has surely passed; and, when the connection was down, as soon as it is
// back, so that a failed acquire does not leave its keys for their TTL when
// nobody acquires again.
#pragma once

#include <dlock/error.hpp>

#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace dlock::redis::detail {

class cleanup_ledger {
 public:
  using clock = std::chrono::steady_clock;

  explicit cleanup_ledger(std::size_t masters) : awaiting_reconnection_(masters, false) {}

  /// A delete went out; it is settled once every master it went to answered or timed out.
  void sent() noexcept { ++in_flight_; }
  bool in_flight() const noexcept { return in_flight_ > 0; }
  /// `then` runs once none is in flight, unless `who` forgot it first.
  /// Precondition: one is.
  void after_settled(const void* who, std::function<void()> then) { waiters_.push_back({who, std::move(then)}); }
  void forget(const void* who) {
    waiters_.erase(std::remove_if(waiters_.begin(), waiters_.end(), [who](const waiter& w) { return w.who == who; }),
                   waiters_.end());
  }
  /// One settled: the waiters to run now (none while others are in flight).
  auto settled() {
    boost::container::small_vector<waiter, 1> due;
    if (--in_flight_ == 0) due.swap(waiters_);
    return due;
  }

  /// The delete of `token` failed on `master` with `why` at `now`. True:
  /// watch that master's reconnection, then call reconnected(). A master
  /// that timed out waits for the next SET: resending at once would only
  /// pile more commands on a master that does not answer.
  bool note(std::size_t master, std::string token, error_code why, clock::time_point now,
            std::chrono::milliseconds ttl) {
    constexpr std::size_t most = 64;  // a bound: they expire with their TTL anyway
    if (entries_.size() >= most) return false;
    entries_.push_back({master, std::move(token), now + ttl});
    if (why != dlock::condition::connection_lost || awaiting_reconnection_[master]) return false;
    awaiting_reconnection_[master] = true;
    return true;
  }
  /// The watched master's connection is back (or the wait ended).
  void reconnected(std::size_t master) noexcept { awaiting_reconnection_[master] = false; }

  bool empty() const noexcept { return entries_.empty(); }
  /// The tokens to delete on `master` again now, taken out of the ledger
  /// (noted again if they fail again); those past their TTL are dropped.
  std::vector<std::string> take(std::size_t master, clock::time_point now) {
    std::vector<std::string> due;
    for (auto& e : entries_)
      if (e.master == master && e.give_up > now) due.push_back(std::move(e.token));
    std::erase_if(entries_, [master](const entry& e) { return e.master == master; });
    return due;
  }

 private:
  struct entry {
    std::size_t master;
    std::string token;
    clock::time_point give_up;
  };
  struct waiter {
    const void* who;
    std::function<void()> then;
  };
  int in_flight_ = 0;  // these two are read before every attempt, the rest seldom
  std::vector<entry> entries_;
  boost::container::small_vector<waiter, 1> waiters_;  // one acquire at a time, and settle()s
  std::vector<bool> awaiting_reconnection_;  // a wait for its reconnection is running (one at a time)
};

}  // namespace dlock::redis::detail
