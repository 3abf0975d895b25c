// A lock held on a majority of N independent Redis masters (Redlock).
//
// The algorithm (the Redis "distlock" document), as done here:
//  1. Read the monotonic clock, then send `SET key token NX PX ttl` to all N
//     masters at once over their pipelined connections: one round trip, not N.
//     Each master gets `master_timeout` (tens of ms, far below the TTL) to answer.
//  2. The lock is held when a majority (N/2 + 1) said yes and
//     validity = ttl - elapsed - (ttl * drift_factor + drift_extra) is positive. The
//     decision is taken as soon as it is known; slow masters are not waited for.
//  3. A failed attempt releases the key on *all* masters (a SET may have landed
//     without its answer reaching us), then waits retry_delay +/- retry_jitter
//     and tries again, until `retry_count` or `wait_limit` runs out. Every
//     attempt has a token of its own, and its SET waits until every master
//     answered the previous attempt's release (or its timeout passed): a late
//     cleanup can never delete a newer attempt's key.
//
// Assumptions (the algorithm is only as safe as these):
//  - Clocks of the client and the masters advance at about the same rate:
//    drift is bounded by drift_factor (default 1%) plus drift_extra (2 ms).
//  - A master that runs without persistence (or with fsync off) must stay down
//    for at least one TTL before it restarts empty: otherwise it forgets our key
//    and a second client can reach a majority. Delay restarts, or enable AOF
//    with `appendfsync always`.
//  - The masters are independent (no replication between them).
//  - Fencing tokens (`redlock_options::fencing`, off by default): each
//    master counts holds on the counter `<key>:fencing`, in the script that
//    sets the key. Every hold's token was left on a majority of counters
//    before its acquire completed (written back to the masters behind it);
//    a later round is won only once the counters it saw cover a majority,
//    which meets that one, and its token is the largest it saw: so tokens
//    grow strictly from one hold to the next. This needs counters that
//    survive restarts (AOF with `appendfsync always`): the delayed restart
//    that keeps mutual exclusion does not keep a counter. A master that
//    comes back empty has no counter: it is not counted until a round
//    re-seeds it from a majority's largest, so fewer than a majority losing
//    their data cannot make a token go back. A key is new (its token starts
//    at 1) when a majority answered, none of them has a counter, and every
//    other master failed: it would take a master losing its data *and* the
//    rest of that majority never having been reachable to mistake an old
//    key for a new one.
//  - N should be odd. An even N works but is wasteful: 4 masters tolerate one
//    failure, like 3 do.
//
// Wire compatibility: each key holds the plain token written by SET NX PX
// (any Redis from 2.6.12 on);
// release is compare-and-DEL and extend compare-and-PEXPIRE, the scheme of
// redsync and node-redlock, so mixed fleets can share one Redlock.
//
// Thread safety, as for Asio's own I/O objects: a redlock runs on the executor
// given to its constructor and is not thread-safe. On an io_context run by
// several threads, give it and its master connections one strand. Completions
// run on the handler's associated executor (by default the redlock's). One
// operation at a time: acquire() while an acquire or a release() of the same
// redlock is still running fails at once with `dlock::error::in_progress`.
//
// Movable (construction only, like every dlock lock); a moved-from redlock
// may only be destroyed.
#pragma once

#include <dlock/config.hpp>
#include <dlock/detail/in_place.hpp>
#include <dlock/detail/initiation.hpp>
#include <dlock/error.hpp>
#include <dlock/limits.hpp>
#include <dlock/lock_loss.hpp>
#include <dlock/lockable.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/detail/redlock_options.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dlock::redis {

namespace detail {
class lock_engine;
}

/// A lock held on a majority of N independent Redis masters (Redlock).
class redlock {
 public:
  /// One connection per master. Never throws and sends nothing: zero
  /// masters, a null or duplicated master (the same connection, or the same
  /// host and port, "localhost" being 127.0.0.1), an empty key, ttl <= 0,
  /// drift_factor outside [0, 1) and other bad options make every acquire
  /// complete with `dlock::error::invalid_argument` at once (the reason is
  /// logged at the `error` level and kept in `invalid_reason()`).
  redlock(asio::any_io_executor executor, std::vector<std::shared_ptr<connection>> masters,
          std::string key, redlock_options options = {});
  /// Ends an acquire in progress (it completes with operation_aborted and
  /// takes no key afterwards) and releases a held lock in the background
  /// (its keys would otherwise live until the TTL ends).
  ~redlock();
  /// Moves the lock (its hold too); the moved-from lock may only be destroyed.
  redlock(redlock&&) noexcept = default;
  redlock& operator=(redlock&&) = delete;
  redlock(const redlock&) = delete;
  redlock& operator=(const redlock&) = delete;

  /// The executor type.
  using executor_type = asio::any_io_executor;
  /// The executor every operation runs on (the one it was given).
  executor_type get_executor() const noexcept;

  /// Acquires, retrying as the options say (`retry_count`, `wait_limit`).
  ///
  /// @param token the completion token.
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// The handler's associated executor (else the redlock's).
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`
  /// and releases the attempt's keys on every master in the background.
  /// @par Errors
  /// `dlock::error::timed_out` (the retries or the wait limit ran out while
  /// others held a majority; nothing left), `no_quorum` (the last attempt
  /// could not reach a majority: too many masters failed or timed out),
  /// `expired` (no validity left when the majority answered),
  /// `invalid_argument` (see the constructor; at once, nothing sent),
  /// `already_held`, `in_progress` (an acquire or release is still running).
  /// `last_outcomes()` tells what each master answered.
  /// @par Lifetime
  /// Destroying the redlock ends the acquire (`operation_aborted`).
  template <class Token = default_token>
  auto acquire(Token&& token = {}) {
    return dlock::detail::async_initiate_erased<Token, void(error_code)>(*this,
        [this](handler0 h, bool in_place) { start_lock(std::move(h), true, std::nullopt, in_place); },
        token);
  }

  /// One attempt, no retries.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor, Cancellation, Lifetime
  /// As `acquire()`.
  /// @par Errors
  /// `dlock::error::taken` when others hold a majority, and those of `acquire()`.
  template <class Token = default_token>
  auto try_acquire(Token&& token = {}) {
    return dlock::detail::async_initiate_erased<Token, void(error_code)>(*this,
        [this](handler0 h, bool in_place) { start_lock(std::move(h), false, std::nullopt, in_place); },
        token);
  }

  /// Acquires as `acquire()` does, retrying until `limit` instead of the
  /// options' `retry_count` and `wait_limit`.
  ///
  /// @param limit how long to wait (rounded up to milliseconds); must be positive.
  /// @param token the completion token.
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor, Cancellation, Lifetime
  /// As `acquire()`.
  /// @par Errors
  /// `dlock::error::timed_out` when `limit` runs out, `invalid_argument` for
  /// `limit <= 0`, and those of `acquire()`.
  template <class Token = default_token>
  auto acquire_for(std::chrono::steady_clock::duration limit, Token&& token = {}) {
    auto wait = dlock::detail::limit_in_ms(limit);
    return dlock::detail::async_initiate_erased<Token, void(error_code)>(*this,
        [this](handler0 h, bool in_place, std::chrono::milliseconds w) { start_lock(std::move(h), true, w, in_place); },
        token, wait);
  }

  /// Compare-and-delete on all masters at once. Completes as soon as a
  /// majority released our key (the lock is free for others); the slower
  /// masters' releases still run in the background, up to the per-master
  /// timeout. `released_masters()` then tells how many had released it.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// As `acquire()`.
  /// @par Cancellation
  /// None: cleanup always runs.
  /// @par Errors
  /// `dlock::error::not_owned` when a majority no longer held our token
  /// (expired or taken over), `no_quorum` when too many masters could not be
  /// reached; after a loss, the loss reason (the keys were released in the
  /// background when the loss was found); a second release is a no-op that
  /// succeeds; `not_held` when nothing was held.
  template <class Token = default_token>
  auto release(Token&& token = {}) {
    return dlock::detail::async_initiate_erased<Token, void(error_code)>(*this,
        [this](handler0 h, bool in_place) { start_unlock(std::move(h), in_place); },
        token);
  }

  /// Completes once the deletes this redlock sent in the background (those
  /// of a cancelled or failed acquire, of a lost hold, of a destroyed
  /// redlock's hold) have settled: answered, or given up after
  /// `master_timeout`, by every master they went to. A program about to
  /// close its connections and exit waits for it first: a delete still
  /// queued on a connection when it closes is never sent, and the attempt's
  /// key would stay until its TTL. Completes at once when none is in flight.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// As `acquire()`; never inside this call.
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`
  /// (the deletes go on).
  /// @par Errors
  /// Only `operation_aborted`.
  template <class Token = default_token>
  auto settle(Token&& token = {}) {
    return dlock::detail::async_initiate_on<Token, void(error_code)>(*this,
        [this](auto handler) { start_settle(handler0(std::move(handler))); }, token);
  }

  /// How many masters had released our key when the last `release()`
  /// completed (read on `get_executor()`).
  std::size_t released_masters() const noexcept;

  /// Compare-and-PEXPIRE to `ttl` on all masters at once. Succeeds with a
  /// majority and a positive new validity; otherwise the lock is lost (the
  /// loss signal fires, the keys are released) and the error is
  /// `dlock::error::lost`.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// As `acquire()`.
  /// @par Cancellation
  /// None: it runs until decided (cancellation is ignored).
  /// @par Errors
  /// `dlock::error::lost` (above, or the hold was lost before), `not_held`
  /// (nothing held, or released meanwhile), `invalid_argument` (`ttl <= 0`,
  /// or not above `master_timeout`).
  template <class Token = default_token>
  auto extend(std::chrono::milliseconds ttl, Token&& token = {}) {
    return dlock::detail::async_initiate_on<Token, void(error_code)>(*this,
        [this](auto handler, std::chrono::milliseconds t) { start_extend(t, handler0(std::move(handler))); },
        token, ttl);
  }

  /// True between a successful `acquire()` and `release()`, loss or the
  /// validity running out: never true with `validity()` at zero. Like
  /// `loss()`, usable from any thread; the other getters of a changing state
  /// (`last_outcomes()`) are read on `get_executor()`.
  bool held() const noexcept;
  /// Time the lock is still safe to use: ttl - (now - time the last SET or
  /// extend was sent) - drift. Zero when not held.
  std::chrono::milliseconds validity() const noexcept;
  /// Tells the holder when the lock is lost (failed extension, validity ran out).
  lock_loss& loss() noexcept;
  /// What each master answered in the last attempt, in master order, e.g.
  /// "127.0.0.1:6379=ok 127.0.0.1:6380=timed_out ...", for logs.
  std::string last_outcomes() const;
  /// The token of the current (or last) acquisition, 16 random bytes as hex
  /// ("" when never acquired), as `redis::lock::token()`: read it on the
  /// redlock's executor; the next acquire changes it.
  const std::string& token() const noexcept;
  /// The fencing token of the current hold (see the assumptions above), 0
  /// when not held or without `redlock_options::fencing`. Any thread.
  std::int64_t fencing_token() const noexcept;
  /// The key.
  const std::string& key() const noexcept;
  /// The key (`dlock::lockable`'s name).
  const std::string& name() const noexcept { return key(); }
  /// How many masters it was given.
  std::size_t masters() const noexcept;
  /// Why the constructor's arguments are unusable; empty when they are fine.
  const std::string& invalid_reason() const noexcept;

 private:
  using handler0 = asio::any_completion_handler<void(error_code)>;
  // `in_place`: the handler may run in place when the outcome is known.
  // `wait`: acquire_for's limit, else the options' retry_count and wait_limit.
  void start_lock(handler0 handler, bool retry, std::optional<std::chrono::milliseconds> wait, bool in_place);
  void start_unlock(handler0 handler, bool in_place);
  void start_extend(std::chrono::milliseconds ttl, handler0 handler);
  void start_settle(handler0 handler);

  std::shared_ptr<detail::lock_engine> impl_;
};

static_assert(fenced_lockable<redlock>);

}  // namespace dlock::redis
