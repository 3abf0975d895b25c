// Run a critical section under a lock, released on every path.
#pragma once

#include <dlock/config.hpp>
#include <dlock/error.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <exception>
#include <tuple>
#include <type_traits>

namespace dlock {

/// Acquires `lock`, runs `body()` (which returns an `asio::awaitable<T>`),
/// then releases the lock, whether the body returns, throws or is cancelled.
///
/// The body runs in its own coroutine and is cancelled (terminal) when the
/// lock is lost; `with_lock` then throws `boost::system::system_error` with
/// the loss reason. Cancelling the caller cancels the acquire or the body.
/// The release is never cancelled: it runs to completion even after the
/// caller was. Exceptions from the body are rethrown after the release.
///
/// `Lock` is any dlock lock: `acquire()`, `release()`, `loss()`.
/// The io_context may run on several threads: the body runs on the caller's
/// executor, the lock's operations move to the lock's, and the wait for a
/// loss goes through `lock_loss`, which is thread-safe.
/// With g++ 12, pass a named body (`auto body = [...]{...}; co_await
/// with_lock(m, body);`) when its captures are not trivially destructible:
/// a lambda temporary inside a `co_await` expression is destroyed twice.
template <class Lock, class Body>
auto with_lock(Lock& lock, Body body) -> std::invoke_result_t<Body&> {
  using result_type = typename std::invoke_result_t<Body&>::value_type;
  namespace ex = asio::experimental;

  co_await lock.acquire(asio::use_awaitable);
  auto executor = co_await asio::this_coro::executor;
  // Whichever ends first cancels the other: a loss cancels the body, the
  // body's end cancels the wait for a loss.
  auto group = ex::make_parallel_group(asio::co_spawn(executor, body(), asio::deferred),
                                       lock.loss().wait(asio::deferred));
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
  // The release must run even if the caller was cancelled meanwhile: do not
  // let that cancellation throw before the release starts (release itself
  // ignores cancellation, so it runs to completion).
  co_await asio::this_coro::throw_if_cancelled(false);
  // release() completes with the error first, and some locks add a value
  // (Redlock: how many masters released): keep the error.
  auto released = co_await lock.release(asio::as_tuple(asio::use_awaitable));
  error_code release_ec = std::get<0>(released);
  co_await asio::this_coro::throw_if_cancelled(true);
  if (loss_reason) throw boost::system::system_error(loss_reason, "dlock::with_lock: the lock was lost");
  if (failure) std::rethrow_exception(failure);
  if (release_ec && release_ec != dlock::error::not_held)
    throw boost::system::system_error(release_ec, "dlock::with_lock: release");
  if constexpr (!std::is_void_v<result_type>) co_return value;
}

}  // namespace dlock
