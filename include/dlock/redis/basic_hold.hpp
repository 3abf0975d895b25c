// The operations of a hold on one Redis server, shared by redis::lock and
// redis::semaphore (the lock engine with one server, as redis::redlock is
// with N; they differ only in what they send).
#pragma once

#include <dlock/config.hpp>
#include <dlock/detail/in_place.hpp>
#include <dlock/detail/initiation.hpp>
#include <dlock/error.hpp>
#include <dlock/limits.hpp>
#include <dlock/lock_loss.hpp>
#include <dlock/redis/lock_options.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace dlock::redis {

namespace detail {
class lock_engine;
}

/// A hold on one Redis server, taken with a fresh random token per attempt,
/// trusted for `validity()`, extended and released only by that token's
/// holder: the operations `redis::lock` (a key) and `redis::semaphore` (one
/// lease of a sorted set) share. Not used on its own.
class basic_hold {
 public:
  /// Acquires, trying again every `retry_delay +- retry_jitter` while it is
  /// taken, until `options().wait` runs out.
  ///
  /// @param token the completion token.
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// The handler's associated executor (else the connection's); may be
  /// started from any executor (the operation moves to the connection's).
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`;
  /// an attempt that may have landed unseen is undone by a compare-and-delete.
  /// @par Errors
  /// `dlock::error::timed_out` (the wait ran out, nothing left),
  /// `invalid_argument` (bad key or options, a ttl not larger than the
  /// drift allowance: at once, nothing sent), `expired` (the yes was read
  /// after the hold's validity ran out, e.g. the event loop was blocked past
  /// the ttl: never held, the key is deleted), the server's own error
  /// (`redis::error`, the key deleted when it may have been set),
  /// `already_held`, `in_progress` (an acquire or release of this object is
  /// still running), `closed` (the connection was closed or destroyed), else a
  /// `redis::error` or connection error.
  /// @par Lifetime
  /// Destroying the object ends the acquire (`operation_aborted`, it never
  /// holds afterwards); destroying the connection first gives `closed`.
  template <class Token = default_token>
  auto acquire(Token&& token = {}) {
    return dlock::detail::async_initiate_erased<Token, void(error_code)>(*this,
        [this](handler_type h, bool in_place) { start_acquire(true, std::nullopt, std::move(h), in_place); },
        token);
  }

  /// One attempt.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor, Cancellation, Lifetime
  /// As `acquire()`.
  /// @par Errors
  /// `dlock::error::taken` at once if it is held (every lease, for a
  /// semaphore), and those of `acquire()`.
  template <class Token = default_token>
  auto try_acquire(Token&& token = {}) {
    return dlock::detail::async_initiate_erased<Token, void(error_code)>(*this,
        [this](handler_type h, bool in_place) { start_acquire(false, std::nullopt, std::move(h), in_place); },
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
    auto wait = dlock::detail::limit_in_ms(limit);
    return dlock::detail::async_initiate_erased<Token, void(error_code)>(*this,
        [this](handler_type h, bool in_place, std::chrono::milliseconds w) {
          start_acquire(true, w, std::move(h), in_place);
        },
        token, wait);
  }

  /// Ends the hold if it is still ours (after stopping auto-extension and
  /// waiting for an extension in flight): a compare-and-delete of our token.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// As `acquire()`.
  /// @par Cancellation
  /// None: a release always runs to completion.
  /// @par Errors
  /// `dlock::error::not_owned` when our token was no longer there; after a
  /// loss, the loss reason (the delete is still sent); a second release is a
  /// no-op that succeeds; `not_held` when nothing was held; `closed`.
  template <class Token = default_token>
  auto release(Token&& token = {}) {
    return dlock::detail::async_initiate_erased<Token, void(error_code)>(*this,
        [this](handler_type h, bool in_place) { start_release(std::move(h), in_place); },
        token);
  }

  /// Moves the hold's expiry to `ttl` from now if our token is still there
  /// (and, for a lease, unexpired).
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// As `acquire()`.
  /// @par Cancellation
  /// Terminal only: completes with `asio::error::operation_aborted`; a
  /// command already written may still extend the hold.
  /// @par Errors
  /// `dlock::error::not_owned` (the token is gone: the loss fires),
  /// `expired` (the yes was read after the extension's own validity ran
  /// out: the loss fires), `not_held`, `lost` (after a loss),
  /// `invalid_argument` (`ttl <= 0`), else a
  /// `redis::error` or connection error.
  /// @par Lifetime
  /// The object must be alive when the operation starts; the connection may
  /// go (`dlock::error::closed`).
  template <class Token = default_token>
  auto extend(std::chrono::milliseconds ttl, Token&& token = {}) {
    return dlock::detail::async_initiate_on<Token, void(error_code)>(*this,
        [this](auto handler, std::chrono::milliseconds t) { start_extend(t, handler_type(std::move(handler))); },
        token, ttl);
  }

  /// The connection's executor, on which the hold runs.
  asio::any_io_executor get_executor() const noexcept;
  /// True from a successful acquire until release, loss (from the moment the
  /// loss is known: `loss()` has fired) or the validity running out, whichever
  /// comes first: never true with `validity()` at zero. Any thread.
  bool held() const noexcept;
  /// Time left before the hold may expire on the server (0 when not held,
  /// lost, or past the end).
  std::chrono::milliseconds validity() const noexcept;
  /// The current token ("" when never acquired): read it on the lock's
  /// executor; the next acquire changes it.
  const std::string& token() const noexcept;
  /// The key.
  const std::string& key() const noexcept;
  /// The key (`dlock::lockable`'s name).
  const std::string& name() const noexcept { return key(); }
  /// Told when the hold is lost (see dlock::lock_loss): validity ran out (with
  /// or without auto-extension), an extension failed, or extend() found the
  /// token gone.
  lock_loss& loss() noexcept;
  /// Successful automatic extensions during the current hold.
  std::uint64_t extensions() const noexcept;

 protected:
  /// Takes the shared state (which lives on the connection's executor).
  basic_hold(std::shared_ptr<detail::lock_engine> engine, lock_options options);
  /// Ends an acquire in progress (operation_aborted; it never holds
  /// afterwards) and releases a held hold in the background.
  ~basic_hold();
  /// Moves the hold; the moved-from object may only be destroyed.
  basic_hold(basic_hold&&) noexcept = default;
  basic_hold& operator=(basic_hold&&) = delete;
  basic_hold(const basic_hold&) = delete;
  basic_hold& operator=(const basic_hold&) = delete;

  /// The state, shared with the operations in flight: the lock engine
  /// every Redis lock runs on, here with one server.
  std::shared_ptr<detail::lock_engine> engine_;
  /// As given (options() returns them); the engine keeps them in its words.
  lock_options options_;

 private:
  using handler_type = asio::any_completion_handler<void(error_code)>;
  // `in_place`: the handler may run in place when the reply is read.
  // `wait`: acquire_for's limit, else `options().wait`.
  void start_acquire(bool retry, std::optional<std::chrono::milliseconds> wait, handler_type handler, bool in_place);
  void start_release(handler_type handler, bool in_place);
  void start_extend(std::chrono::milliseconds ttl, handler_type handler);
};

}  // namespace dlock::redis
