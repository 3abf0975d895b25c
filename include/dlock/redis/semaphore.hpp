// A counting semaphore of leases on one Redis server: at most `max_leases`
// holders of a key at once, each lease ending by itself when its TTL passes.
#pragma once

#include <dlock/lockable.hpp>
#include <dlock/observer.hpp>
#include <dlock/redis/basic_hold.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/lock.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace dlock::redis {

/// How a `redis::semaphore` acquires, holds and extends its lease: the
/// options of `redis::lock`, field for field (a lease has no fencing token:
/// `fencing` on is refused with dlock::error::invalid_argument).
using semaphore_options = lock_options;

/// One lease of a counting semaphore kept in a sorted set at `key`: each
/// member is a holder's token (128 random bits, hex, fresh for every
/// attempt), scored by the lease's expiry in milliseconds of the server's
/// clock (`TIME`, read inside the scripts: the clients' clocks never count).
/// Three scripts, each one atomic step on the server:
///
/// - acquire: removes the expired members (ZREMRANGEBYSCORE), then adds ours
///   (ZADD) if fewer than `max_leases` remain, and makes the key live at
///   least as long as its longest lease (PEXPIRE), so an abandoned set
///   disappears on its own;
/// - extend: moves our score to now + ttl, only while our member is there
///   and unexpired;
/// - release: removes our member (ZREM), nobody else's.
///
/// A holder that crashes leaves its member until its TTL passes; the next
/// acquire then drops it, so a lease is never lost for longer than a TTL.
/// Every user of a key must pass the same `max_leases` (it is not stored on
/// the server: each acquire compares with its own).
///
/// One lease per object: acquire() takes one lease, release() gives it back.
/// Hold several leases with several objects (they may share a connection).
///
/// Not fair: a waiting acquire polls, one attempt every `retry_delay +-
/// retry_jitter` until `wait` runs out, and a lease that frees goes to
/// whichever attempt comes first, not to the longest waiter (a connection
/// cannot subscribe, so there is nothing to wake a waiter without polling).
///
/// The same safety argument as `redis::lock`: the lease is trusted for
/// `validity()`, its TTL less the time the request took and a drift
/// allowance; the server must keep its data and its clock must not jump
/// forward (Redis expires keys by that clock too). Needs Redis 5 or later
/// (a script that reads TIME before writing).
///
/// Errors: dlock::error::taken (try_acquire: all leases are held), timed_out
/// (the wait ran out), not_owned (our member is gone: expired, or removed by
/// hand), not_held / already_held (this object's state), in_progress (an
/// acquire or release of this object is still running), invalid_argument
/// (empty key, max_leases 0, ttl <= 0, negative wait / retry_delay /
/// retry_jitter / drift_extra / max_hold, drift_factor outside [0, 1),
/// extend_fraction outside (0, 1); refused at once, nothing sent), closed
/// (the connection was closed or destroyed), else a redis::error or
/// connection error (`wrong_type` when the key holds something else). An
/// attempt whose script may have run unseen (timed out, cancelled,
/// connection lost) is undone by the release script for its token, sent again once the
/// connection is back (while this object lives), until its TTL has passed; no attempt of this object is
/// sent while that undo is in flight.
///
/// Movable (construction only); a moved-from semaphore may only be destroyed.
/// Runs on the connection's executor and, like the connection, is not
/// thread-safe: use it from one coroutine at a time. `held()` and `loss()`
/// may be used from any thread. The semaphore shares the connection's
/// internals: if the connection is destroyed first, its operations fail with
/// dlock::error::closed. Destroying the semaphore ends an acquire in progress
/// (operation_aborted; it never takes a lease afterwards) and releases a held
/// lease in the background.
/// Its operations (acquire, try_acquire, acquire_for, release, extend) and
/// accessors are `basic_hold`'s, over the sorted set's scripts; `token()` is
/// our member.
class semaphore : public basic_hold {
 public:
  /// Nothing is sent and nothing is checked here (no constructor throws for
  /// bad arguments): they are reported by the first acquire
  /// (`dlock::error::invalid_argument`).
  semaphore(connection& conn, std::string key, std::size_t max_leases, semaphore_options opts = {});
  /// Moves the semaphore (its lease too); the moved-from one may only be destroyed.
  semaphore(semaphore&&) noexcept = default;

  /// How many leases the key admits at once, as given at construction.
  std::size_t max_leases() const noexcept;
  /// The options given at construction.
  const semaphore_options& options() const noexcept;
};

static_assert(lockable<semaphore>);

}  // namespace dlock::redis
