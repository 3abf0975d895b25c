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
#pragma once

#include <chrono>
#include <cstdint>

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

}  // namespace dlock::redis::detail
