// The settings of a redis::lock and a redis::semaphore.
#pragma once

#include <dlock/observer.hpp>

#include <chrono>
#include <memory>

namespace dlock::redis {

/// How a `redis::lock` (and a `redis::semaphore`'s lease) acquires, holds and
/// extends.
struct lock_options {
  /// The key's time to live on the server (PX), and of each extension.
  std::chrono::milliseconds ttl{10000};
  /// acquire(): keep trying this long, then fail with dlock::error::timed_out.
  std::chrono::milliseconds wait{10000};
  /// Delay between attempts: retry_delay +- retry_jitter (uniform).
  std::chrono::milliseconds retry_delay{100};
  /// See retry_delay.
  std::chrono::milliseconds retry_jitter{50};
  /// validity = ttl - (now - sent) - (ttl * drift_factor + drift_extra).
  double drift_factor = 0.01;
  /// See drift_factor.
  std::chrono::milliseconds drift_extra{2};
  /// While held, extend every ttl * extend_fraction (a watchdog, like
  /// Redisson's); a failed extension, or validity running out first, is a loss.
  bool auto_extend = false;
  /// See auto_extend.
  double extend_fraction = 1.0 / 3;
  /// No extension beyond this total hold time (0: no cap); the lock then
  /// expires by its TTL and the loss is told.
  std::chrono::milliseconds max_hold{0};
  /// Give every hold a fencing token (see `lock::fencing_token()`): the
  /// acquire sets the key and increments its companion counter
  /// `<key>:fencing` in one atomic step (a MULTI block). Off by default: the
  /// counter is a second key that stays for good, and the block costs about
  /// 5 % of an acquire+release here (benchmarks/RESULTS.md, "Fencing's cost").
  /// A semaphore refuses it (dlock::error::invalid_argument).
  bool fencing = false;
  /// Replica acknowledgement: the acquire (and each extension) is followed,
  /// in the same write, by `WAIT replicas replica_timeout`; fewer replicas
  /// than this acknowledging it fail it with dlock::error::not_replicated,
  /// and an acquire's key is deleted. 0 (the default): no WAIT. It narrows
  /// the window in which a failover loses the key, it does not close it:
  /// WAIT is not consensus (RELIABILITY.md, "Redis in production"). WAIT
  /// holds the connection's later commands until it answers.
  int replicas = 0;
  /// See `replicas`: how long the server waits for them (more than 0).
  std::chrono::milliseconds replica_timeout{100};
  /// Told of this lock's events (dlock/observer.hpp); none: the connection's.
  std::shared_ptr<dlock::observer> observer{};
};

}  // namespace dlock::redis
