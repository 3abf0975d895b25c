// A lock on one Redis server: SET key token NX PX ttl, released and extended
// only by the holder of the token.
#pragma once

#include <dlock/config.hpp>
#include <dlock/detail/in_place.hpp>
#include <dlock/error.hpp>
#include <dlock/lock_loss.hpp>
#include <dlock/lockable.hpp>
#include <dlock/redis/connection.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace dlock::redis {

namespace detail {
struct lock_state;
}

/// How a `redis::lock` acquires, holds and extends.
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
  /// acquire is one script that sets the key and increments its companion
  /// counter `<key>:fencing` in the same atomic step. Off by default: the
  /// script costs the server more than a plain `SET`, about 10-18 % of an
  /// acquire+release here (benchmarks/RESULTS.md, "Fencing's cost").
  bool fencing = false;
};

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
/// connection was down, that delete is sent again once it is back, until the
/// TTL has passed.
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
class lock {
 public:
  /// Nothing is sent and nothing is checked here: bad options are reported
  /// by the first acquire (`dlock::error::invalid_argument`). The lock keeps
  /// the connection's internals alive (a shared handle).
  lock(connection& conn, std::string key, lock_options opts = {});
  ~lock();
  /// Moves the lock (its hold too); the moved-from lock may only be destroyed.
  lock(lock&&) noexcept = default;
  lock& operator=(lock&&) = delete;
  lock(const lock&) = delete;
  lock& operator=(const lock&) = delete;

  /// Acquires, retrying `SET NX PX` with jitter until `options().wait` runs out.
  ///
  /// @param token the completion token.
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// The handler's associated executor (else the connection's); may be
  /// started from any executor (the operation moves to the connection's).
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`;
  /// a `SET` that may have landed unseen is undone by a compare-and-delete.
  /// @par Errors
  /// `dlock::error::timed_out` (the wait ran out, nothing left),
  /// `invalid_argument` (bad key or options, at once, nothing sent),
  /// `already_held`, `in_progress` (an acquire or release of this object is
  /// still running), `closed` (the connection was closed or destroyed), else a
  /// `redis::error` or connection error.
  /// @par Lifetime
  /// Destroying the lock ends the acquire (`operation_aborted`, it never
  /// takes the key afterwards); destroying the connection first gives `closed`.
  template <class Token = default_token>
  auto acquire(Token&& token = {}) {
    return asio::async_initiate<Token, void(error_code)>(
        [this](auto handler) {
          bool in_place = dlock::detail::runs_on(handler, get_executor());
          start_acquire(true, std::nullopt, handler_type(std::move(handler)), in_place);
        },
        token);
  }

  /// One attempt.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor, Cancellation, Lifetime
  /// As `acquire()`.
  /// @par Errors
  /// `dlock::error::taken` at once if someone holds the key, and those of `acquire()`.
  template <class Token = default_token>
  auto try_acquire(Token&& token = {}) {
    return asio::async_initiate<Token, void(error_code)>(
        [this](auto handler) {
          bool in_place = dlock::detail::runs_on(handler, get_executor());
          start_acquire(false, std::nullopt, handler_type(std::move(handler)), in_place);
        },
        token);
  }

  /// Acquires as `acquire()` does, waiting at most `limit` instead of `options().wait`.
  ///
  /// @param limit how long to wait (rounded up to milliseconds); must be positive.
  /// @param token the completion token.
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor, Cancellation, Lifetime
  /// As `acquire()`.
  /// @par Errors
  /// `dlock::error::timed_out` when `limit` runs out (nothing left),
  /// `invalid_argument` for `limit <= 0`, and those of `acquire()`.
  template <class Token = default_token>
  auto acquire_for(std::chrono::steady_clock::duration limit, Token&& token = {}) {
    auto wait = std::chrono::ceil<std::chrono::milliseconds>(limit);
    return asio::async_initiate<Token, void(error_code)>(
        [this](auto handler, std::chrono::milliseconds w) {
          bool in_place = dlock::detail::runs_on(handler, get_executor());
          start_acquire(true, w, handler_type(std::move(handler)), in_place);
        },
        token, wait);
  }

  /// Deletes the key if it still holds our token (after stopping
  /// auto-extension and waiting for an extension in flight).
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// As `acquire()`.
  /// @par Cancellation
  /// None: a release always runs to completion.
  /// @par Errors
  /// `dlock::error::not_owned` when the key no longer held our token; after a
  /// loss, the loss reason (the delete is still sent); a second release is a
  /// no-op that succeeds; `not_held` when nothing was held; `closed`.
  template <class Token = default_token>
  auto release(Token&& token = {}) {
    return asio::async_initiate<Token, void(error_code)>(
        [this](auto handler) {
          bool in_place = dlock::detail::runs_on(handler, get_executor());
          start_release(handler_type(std::move(handler)), in_place);
        },
        token);
  }
  /// Sets the key's expiry to `ttl` if it still holds our token.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// As `acquire()`.
  /// @par Cancellation
  /// Terminal only: completes with `asio::error::operation_aborted`; a
  /// command already written may still extend the key.
  /// @par Errors
  /// `dlock::error::not_owned` (the token is gone: the loss fires),
  /// `not_held`, `lost` (after a loss), `invalid_argument` (`ttl <= 0`), else a
  /// `redis::error` or connection error.
  /// @par Lifetime
  /// The lock must be alive when the operation starts; the connection may go
  /// (`dlock::error::closed`).
  template <class Token = default_token>
  auto extend(std::chrono::milliseconds ttl, Token&& token = {}) {
    return asio::async_initiate<Token, void(error_code)>(
        [this](auto handler, std::chrono::milliseconds t) { start_extend(t, handler_type(std::move(handler))); },
        token, ttl);
  }

  /// The connection's executor, on which the lock runs.
  asio::any_io_executor get_executor() const noexcept;
  /// True from a successful acquire until release or loss (from the moment
  /// the loss is known: `loss()` has fired).
  bool held() const noexcept;
  /// Time left before the lock may expire on the server (0 when not held,
  /// lost, or past the end).
  std::chrono::milliseconds validity() const noexcept;
  /// The current token ("" when never acquired).
  const std::string& token() const noexcept;
  /// The fencing token of the current hold, 0 when not held (or without
  /// `options().fencing`). It grows strictly from one hold of the key to the
  /// next, whoever holds it, as long as the server keeps its data (the lock's
  /// own assumption): pass it with every write the lock protects, to a store
  /// that refuses a lower one than it has seen (`redis::fenced_set`), and a
  /// holder that paused past its validity is refused. The counter
  /// `<key>:fencing` is never deleted (on Redis Cluster, put the key's hash
  /// tag in braces so both keys share a slot). Any thread.
  std::int64_t fencing_token() const noexcept;
  /// The key.
  const std::string& key() const noexcept;
  /// The key (`dlock::lockable`'s name).
  const std::string& name() const noexcept { return key(); }
  /// The options given at construction.
  const lock_options& options() const noexcept;
  /// Told when the hold is lost (see dlock::lock_loss): validity ran out (with
  /// or without auto-extension), an extension failed, or extend() found the
  /// token gone.
  lock_loss& loss() noexcept;
  /// Successful automatic extensions during the current hold.
  std::uint64_t extensions() const noexcept;

 private:
  using handler_type = asio::any_completion_handler<void(error_code)>;
  // `in_place`: the handler may run in place when the reply is read.
  // `wait`: acquire_for's limit, else `options().wait`.
  void start_acquire(bool retry, std::optional<std::chrono::milliseconds> wait, handler_type handler, bool in_place);
  void start_release(handler_type handler, bool in_place);
  void start_extend(std::chrono::milliseconds ttl, handler_type handler);

  std::shared_ptr<detail::lock_state> state_;
};

static_assert(fenced_lockable<lock>);

}  // namespace dlock::redis
