// The settings of a Redlock; included by <dlock/redis/redlock.hpp>.
#pragma once

#include <dlock/observer.hpp>
#include <dlock/stall_monitor.hpp>

#include <chrono>
#include <memory>
#include <string_view>

namespace dlock::redis {

/// How a `redlock` acquires, retries and extends.
///
/// Defaults follow node-redlock (drift 0.01, 10 retries, 200 ms +/- 100 ms)
/// and the Redis distlock document (per-master timeout of a few tens of ms).
struct redlock_options {
  /// How long the key lives on each master after a successful SET or extend.
  std::chrono::milliseconds ttl{10'000};
  /// Clock drift allowance: drift = ttl * drift_factor + drift_extra.
  /// drift_factor in [0, 1).
  double drift_factor = 0.01;
  /// See drift_factor; not negative.
  std::chrono::milliseconds drift_extra{2};
  /// How long one attempt waits for each master. Much smaller than `ttl`, so a
  /// dead or stopped master costs at most this much per attempt.
  std::chrono::milliseconds master_timeout{50};
  /// Attempts after the first one when `acquire()` fails; -1 retries until `wait_limit`.
  int retry_count = 10;
  /// Pause between attempts: retry_delay +/- a uniform random retry_jitter.
  std::chrono::milliseconds retry_delay{200};
  std::chrono::milliseconds retry_jitter{100};  ///< see `retry_delay`

  /// Overall limit for `acquire()`, all attempts included; zero means no limit
  /// other than `retry_count`.
  std::chrono::milliseconds wait_limit{0};

  /// Keep the lock alive while held by extending it every
  /// `ttl * extend_fraction`, until `release()` or `max_hold` (zero: no cap).
  bool auto_extend = false;
  double extend_fraction = 1.0 / 3.0;     ///< see `auto_extend`
  std::chrono::milliseconds max_hold{0};  ///< see `auto_extend`

  /// Give every hold a fencing token (see `redlock::fencing_token()`): each
  /// master counts holds on the key's companion counter `<key>:fencing`.
  /// Off by default: about 10 % of an acquire+release here
  /// (benchmarks/RESULTS.md, "Fencing's cost").
  bool fencing = false;
  /// Told of this lock's events and rounds (dlock/observer.hpp); none: the
  /// first master's connection's.
  std::shared_ptr<dlock::observer> observer{};
  /// Stall detection (dlock/stall_monitor.hpp); none: the first master's connection's.
  std::shared_ptr<dlock::stall_monitor> stall{};
};

namespace detail {

/// True when two master addresses name one server: the same port and the
/// same host, ignoring case, with "localhost" taken as 127.0.0.1 (no lookup).
bool same_master(std::string_view host_a, unsigned port_a, std::string_view host_b, unsigned port_b) noexcept;

/// Why `options` (with `masters` masters and `key`) cannot make a Redlock,
/// or an empty view when they can.
std::string_view redlock_invalid_reason(const redlock_options& options, std::size_t masters,
                                        std::string_view key) noexcept;

}  // namespace detail
}  // namespace dlock::redis
