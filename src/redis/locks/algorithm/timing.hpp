// How long a Redis lock may be trusted, one formula for every Redis lock.
//
// A key set (or extended) by commands sent at `sent` with `ttl` lives on the
// server until at least `sent + ttl`: the server starts counting after it
// got the command. The holder's clock and the server's may run at different
// rates, so a drift allowance is taken off (redis.io, redis++ and
// node-redlock: ttl * 1 % + 2 ms):
//   valid_until = sent + ttl - drift,   drift = ttl * drift_factor + drift_extra
// and the validity at `now` is valid_until - now, rounded down to whole
// milliseconds so that it is never overstated.
//
// And when a lock's fan-outs time out: deadline_queue, below.
#pragma once

#include <boost/intrusive/list.hpp>

#include <chrono>
#include <cstdint>
#include <optional>

namespace dlock::redis::detail {

using steady_time = std::chrono::steady_clock::time_point;

struct drift_rule {
  double factor = 0.01;
  std::chrono::milliseconds extra{2};
};

inline std::chrono::microseconds drift(std::chrono::milliseconds ttl, drift_rule rule) {
  auto scaled = static_cast<double>(ttl.count()) * 1000.0 * rule.factor;
  return std::chrono::microseconds(static_cast<std::int64_t>(scaled)) + rule.extra;
}

/// A ttl larger than its own drift allowance, so that a hold could ever be
/// valid (computed in double: no overflow for any ttl).
inline bool exceeds_drift(std::chrono::milliseconds ttl, drift_rule rule) {
  auto ms = static_cast<double>(ttl.count());
  return ms > ms * rule.factor + static_cast<double>(rule.extra.count());
}

inline steady_time valid_until(steady_time sent, std::chrono::milliseconds ttl, drift_rule rule) {
  return sent + ttl - drift(ttl, rule);
}

/// Signed: zero or negative once the validity has run out.
inline std::chrono::milliseconds validity_left(steady_time valid_until, steady_time now) {
  return std::chrono::floor<std::chrono::milliseconds>(valid_until - now);
}

/// The same, never negative (what `validity()` accessors report).
inline std::chrono::milliseconds remaining(steady_time valid_until, steady_time now) {
  auto left = validity_left(valid_until, now);
  return left.count() > 0 ? left : std::chrono::milliseconds(0);
}

/// A fan-out's place in its lock's deadline queue. It lives inside the
/// fan-out (`owner`), so watching one allocates nothing; the queue does not
/// own it, and the fan-out leaves it when answered, expired or destroyed.
struct deadline_entry : boost::intrusive::list_base_hook<> {
  steady_time due{};
  void* owner = nullptr;
};

/// The per-master deadlines of a lock's fan-outs. They all use the same
/// timeout, so they fall due in the order they were watched, and one timer
/// serves them all, set once per timeout period rather than twice per
/// fan-out (a system call each).
class deadline_queue {
 public:
  explicit deadline_queue(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  deadline_queue(const deadline_queue&) = delete;
  deadline_queue& operator=(const deadline_queue&) = delete;

  void watch(deadline_entry& entry, steady_time now) {
    entry.due = now + timeout_;
    entries_.push_back(entry);
  }
  void unwatch(deadline_entry& entry) noexcept {
    if (entry.is_linked()) entries_.erase(entries_.iterator_to(entry));
  }
  /// When the timer is to wake next; none while nothing is watched.
  std::optional<steady_time> next_due() const {
    if (entries_.empty()) return std::nullopt;
    return entries_.front().due;
  }
  /// The oldest entry due at `now`, taken out; null when none is. Those due
  /// within a sixteenth of the timeout count as due (a little early, never
  /// late): under a dead master every fan-out runs into its deadline, and
  /// one wake-up per batch is cheaper than one each.
  deadline_entry* take_due(steady_time now) {
    if (entries_.empty() || entries_.front().due > now + timeout_ / 16) return nullptr;
    auto& due = entries_.front();
    entries_.pop_front();
    return &due;
  }

 private:
  std::chrono::milliseconds timeout_;
  boost::intrusive::list<deadline_entry> entries_;
};

}  // namespace dlock::redis::detail
