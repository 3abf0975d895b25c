/// @file
/// Errors common to every lock, election and queue in dlock, whatever the backend.
/// Backend failures keep their own categories (dlock::zk::error, dlock::redis::error).
#pragma once

#include <dlock/config.hpp>

#include <system_error>
#include <type_traits>

namespace dlock {

/// Outcomes common to every backend (category `dlock::error_category()`).
enum class error {
  invalid_argument = 1,  ///< a path, key, TTL or option the operation cannot accept
  already_held,          ///< acquire on a lock this object already holds (locks are not reentrant)
  not_held,              ///< release or extend of a lock this object does not hold
  taken,                 ///< someone else holds the lock (try-acquire, or the wait limit ran out)
  timed_out,             ///< the wait limit ran out before the operation completed
  lost,                  ///< the lock was held and no longer is (session expired, validity ran out)
  not_owned,             ///< the server no longer holds our token (expired or taken over)
  no_quorum,             ///< Redlock: too many masters failed or timed out for a majority
  expired,               ///< the validity ran out before the acquire was decided (a majority
                         ///< answered too late, or the client paused between send and reply)
  closed,                ///< the client or connection was closed
  empty,                 ///< the queue has no item
  removal_uncertain,     ///< a queue item's removal reply was lost to a connection drop:
                         ///< it may have been removed (by this consumer or another),
                         ///< or may be delivered again (an ack's delete)
  in_progress,           ///< another operation on this lock object (an acquire or a release)
                         ///< has not finished yet: one operation at a time
  stale_token,           ///< a fenced write carried a fencing token lower than one the
                         ///< resource has already seen: a later holder has written since
  stalled,               ///< the event loop stalled long enough that the hold cannot be
                         ///< trusted any more (see dlock::stall_monitor)
  failed_over,           ///< the Redis master the lock was granted on was replaced by a
                         ///< replica (a failover), which may not have the key: the
                         ///< hold cannot be trusted any more
  not_replicated,        ///< fewer replicas acknowledged the lock's key than asked
                         ///< (redis::lock_options::replicas): it was deleted
};

/// The category of `dlock::error` (name "dlock").
const boost::system::error_category& error_category() noexcept;

/// Makes `dlock::error` values convertible to `error_code`.
inline error_code make_error_code(error e) noexcept {
  return error_code(static_cast<int>(e), error_category());
}

/// Conditions that hold whatever the backend, for `ec == dlock::condition::...`
/// (category `dlock::condition_category()`, name "dlock.condition").
enum class condition {
  /// The connection dropped before the answer came: the operation's outcome
  /// may be unknown (`zk::error::connection_loss` and `operation_timeout`,
  /// `redis::error::connection_lost` and `not_connected`).
  connection_lost = 1,
  /// A wait limit or a timeout ran out (`dlock::error::timed_out`,
  /// `zk::error::operation_timeout`, `redis::error::timed_out`).
  timed_out,
  /// The client or connection was closed (`dlock::error::closed`, `zk::error::closing`).
  closed,
};

/// The category of `dlock::condition`.
const boost::system::error_category& condition_category() noexcept;

/// Makes `dlock::condition` values comparable with any dlock `error_code`.
inline boost::system::error_condition make_error_condition(condition c) noexcept {
  return boost::system::error_condition(static_cast<int>(c), condition_category());
}

}  // namespace dlock

/// @cond
template <>
struct boost::system::is_error_code_enum<dlock::error> : std::true_type {};
template <>
struct boost::system::is_error_condition_enum<dlock::condition> : std::true_type {};
/// @endcond
