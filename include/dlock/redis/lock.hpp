// A lock on one Redis server: SET key token NX PX ttl, released and extended
// only by the holder of the token.
#pragma once

#include <dlock/lockable.hpp>
#include <dlock/observer.hpp>
#include <dlock/redis/basic_hold.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/lock_options.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace dlock::redis {

/// The key holds the token as its plain value, as redis-py's `Lock`, redsync
/// and node-redlock do, so they can share a lock with dlock. The token is 128
/// random bits from getrandom(2), hex-encoded, fresh for every attempt.
///
/// Errors: dlock::error::taken (try_acquire: someone else holds it),
/// timed_out (the wait ran out), not_owned (our token
/// is gone: expired or taken over), not_held / already_held (this object's
/// state), in_progress (see below), invalid_argument (empty key, ttl <= 0,
/// negative wait / retry_delay / retry_jitter / drift_extra / max_hold,
/// drift_factor outside [0, 1), extend_fraction outside (0, 1); refused at
/// once, nothing sent), closed (the connection was closed or destroyed),
/// else a redis::error or connection error (the backend failed). An acquire
/// whose SET may have run unseen (timed out, cancelled, connection lost,
/// protocol error) is undone by a compare-and-delete of its token; if the
/// connection was down, that delete is sent again once it is back (while
/// this lock object lives), until the TTL has passed.
///
/// One operation at a time: acquire() or try_acquire() while an acquire or
/// a release of this object is still running fails at once with
/// dlock::error::in_progress (await the release before acquiring again). A
/// release, extension or cleanup acts only on its own hold's token, and no
/// SET is sent before an earlier attempt's cleanup was answered.
///
/// Named acquire / try_acquire / release (a member cannot be called `lock`
/// in class `lock`), like every dlock lock.
///
/// Movable (construction only, like every dlock lock); a moved-from lock may
/// only be destroyed.
///
/// Runs on the connection's executor and, like the connection, is not
/// thread-safe (see connection): use it from one coroutine at a time.
/// Operations may be started from any executor (they move to the
/// connection's), `held()` and `loss()` may be used from any thread;
/// `validity()` and `extensions()`, which auto-extension changes, are read on
/// `get_executor()`. The lock shares the connection's internals: if the
/// connection is destroyed first, the lock's operations fail with
/// dlock::error::closed. Not reentrant. Destroying the lock ends an acquire
/// in progress (operation_aborted; it never takes the key afterwards) and
/// releases a held lock in the background.
/// Its operations (acquire, try_acquire, acquire_for, release, extend) and
/// accessors are `basic_hold`'s; an attempt is one `SET key token NX PX ttl`
/// (with `fencing`, in a MULTI block with the counter's `INCR`).
class lock : public basic_hold {
 public:
  /// Nothing is sent and nothing is checked here: bad options are reported
  /// by the first acquire (`dlock::error::invalid_argument`). The lock keeps
  /// the connection's internals alive (a shared handle).
  lock(connection& conn, std::string key, lock_options opts = {});
  /// Moves the lock (its hold too); the moved-from lock may only be destroyed.
  lock(lock&&) noexcept = default;

  /// The fencing token of the current hold, 0 when not held (or without
  /// `options().fencing`). It grows strictly from one hold of the key to the
  /// next, whoever holds it, as long as the server keeps its data (the lock's
  /// own assumption): pass it with every write the lock protects, to a store
  /// that refuses a lower one than it has seen (`redis::fenced_set`), and a
  /// holder that paused past its validity is refused. The counter
  /// `<key>:fencing` is never deleted (on Redis Cluster, put the key's hash
  /// tag in braces so both keys share a slot). Any thread.
  std::int64_t fencing_token() const noexcept;
  /// The options given at construction.
  const lock_options& options() const noexcept;
};

static_assert(fenced_lockable<lock>);

}  // namespace dlock::redis
