// Run a critical section under a lock, released on every path.
#pragma once

#include <dlock/config.hpp>
#include <dlock/detail/co_spawn_for.hpp>
#include <dlock/detail/initiation.hpp>
#include <dlock/error.hpp>
#include <dlock/lockable.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <exception>
#include <tuple>
#include <type_traits>

namespace dlock {

namespace detail {

template <class Body>
using with_lock_result = typename std::invoke_result_t<Body&>::value_type;

template <class T>
struct with_lock_signature_of {
  using type = void(std::exception_ptr, T);
};
template <>
struct with_lock_signature_of<void> {
  using type = void(std::exception_ptr);
};
template <class Body>
using with_lock_signature = typename with_lock_signature_of<with_lock_result<Body>>::type;

// The whole of with_lock, as one coroutine (a named function with by-value
// parameters: g++ 12 miscompiles capturing coroutine lambdas).
template <class Lock, class Body>
auto run_with_lock(Lock* lock, Body body) -> std::invoke_result_t<Body&> {
  using result_type = with_lock_result<Body>;
  namespace ex = asio::experimental;

  co_await lock->acquire(asio::use_awaitable);
  // From here on the release must run whatever the caller's cancellation
  // (release itself ignores it). One that came after the acquire completed,
  // before this coroutine resumed, skips the body, never the release.
  co_await asio::this_coro::throw_if_cancelled(false);
  asio::cancellation_state cancellation = co_await asio::this_coro::cancellation_state;
  if (cancellation.cancelled() != asio::cancellation_type::none) {
    co_await lock->release(asio::as_tuple(asio::use_awaitable));
    throw boost::system::system_error(asio::error::operation_aborted, "dlock::with_lock: cancelled");
  }
  // This coroutine runs on a strand (see with_lock). Whichever ends first
  // cancels the other: a loss cancels the body, the body's end cancels the
  // wait for a loss. Both complete, and are cancelled, on this strand: a
  // cancellation slot is not thread-safe, and on an io_context run by several
  // threads a loss (told on the lock's strand) would otherwise cancel the
  // body while the body's own operation completes on another thread.
  auto serial = co_await asio::this_coro::executor;
  auto group = ex::make_parallel_group(asio::co_spawn(serial, body(), asio::bind_executor(serial, asio::deferred)),
                                       lock->loss().wait(asio::bind_executor(serial, asio::deferred)));
  std::exception_ptr failure;
  error_code loss_reason;
  [[maybe_unused]] std::conditional_t<std::is_void_v<result_type>, int, result_type> value{};
  if constexpr (std::is_void_v<result_type>) {
    auto [order, body_failure, loss_ec] = co_await group.async_wait(ex::wait_for_one(), asio::use_awaitable);
    failure = body_failure;
    if (order[0] == 1 && loss_ec && loss_ec != asio::error::operation_aborted) loss_reason = loss_ec;
  } else {
    auto [order, body_failure, body_value, loss_ec] =
        co_await group.async_wait(ex::wait_for_one(), asio::use_awaitable);
    failure = body_failure;
    value = std::move(body_value);
    if (order[0] == 1 && loss_ec && loss_ec != asio::error::operation_aborted) loss_reason = loss_ec;
  }
  auto [release_ec] = co_await lock->release(asio::as_tuple(asio::use_awaitable));
  if (loss_reason) throw boost::system::system_error(loss_reason, "dlock::with_lock: the lock was lost");
  if (failure) std::rethrow_exception(failure);
  // A release after a loss reports the loss; a loss found only now (after the
  // body ended) is still a loss the caller must hear of.
  if (release_ec) throw boost::system::system_error(release_ec, "dlock::with_lock: release");
  if constexpr (!std::is_void_v<result_type>) co_return value;
}

}  // namespace detail

/// Acquires `lock`, runs `body()` (which returns an `asio::awaitable<T>`),
/// then releases the lock, whether the body returns, throws or is cancelled.
///
/// The body runs in its own coroutine and is cancelled (terminal) when the
/// lock is lost; the operation then fails with `boost::system::system_error`
/// carrying the loss reason. Exceptions from the body are passed on after the
/// release. The io_context may run on several threads: the lock's operations
/// move to the lock's executor, and the wait for a loss goes through
/// `lock_loss`, which is thread-safe.
///
/// With g++ 12, pass a named body (`auto body = [...]{...}; co_await
/// with_lock(m, body);`) when its captures are not trivially destructible:
/// a lambda temporary inside a `co_await` expression is destroyed twice.
///
/// @param lock any `dlock::basic_lockable` (every dlock lock is one); it must
///   outlive the operation.
/// @param body a callable returning `asio::awaitable<T>`; moved into the operation.
/// @param token the completion token (`co_await with_lock(m, body)` returns `T`).
///   The default is `asio::use_awaitable`, not `dlock::default_token`: Boost
///   1.81 cannot `co_await` a deferred operation whose signature is
///   `void(std::exception_ptr, T)` (`awaitable_async_op_handler::resume`
///   dereferences the wrong member). `asio::as_tuple(asio::deferred)` works.
/// @par Handler signature
/// `void(std::exception_ptr, T)`, or `void(std::exception_ptr)` when `T` is `void`.
/// @par Executor
/// The acquire, the body and the release run on a new strand of the
/// handler's associated executor (else the lock's), so that a loss can cancel
/// the body safely when the io_context runs on several threads; the handler
/// is called on its associated executor. Work the body spawns on its own
/// executor (`this_coro::executor`) runs on that strand too: one at a time.
/// @par Cancellation
/// Terminal, from the handler's slot: cancels the acquire or the body. The
/// release is never cancelled: it runs to completion even after the caller
/// was cancelled.
/// @par Errors
/// A `system_error` with: the acquire's error; the loss reason when the lock
/// was lost; the body's own exception; or the release's error.
template <basic_lockable Lock, class Body, class CompletionToken = asio::use_awaitable_t<>>
auto with_lock(Lock& lock, Body body, CompletionToken&& token = {}) {
  return dlock::detail::async_initiate_on<CompletionToken, detail::with_lock_signature<Body>>(lock,
      [](auto handler, Lock* l, Body b) {
        asio::any_io_executor executor = asio::get_associated_executor(handler, l->get_executor());
        // On a strand of it, so that the group inside and its cancellation
        // (the caller's too) all run in one place.
        // co_spawn_for, not asio::co_spawn: the caller's signal may be gone
        // when its forward reaches the strand (see co_spawn_for.hpp).
        detail::co_spawn_for(asio::make_strand(executor), detail::run_with_lock(l, std::move(b)), std::move(handler));
      },
      token, &lock, std::move(body));
}

}  // namespace dlock
