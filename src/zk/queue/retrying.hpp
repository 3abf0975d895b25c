// The queue recipe's retries as one coroutine helper: every step it may
// repeat after a connection loss goes through with_retries, which asks the
// one retry policy (dlock/zk/detail/retry.hpp) when and how often.
#pragma once

#include "zk/recipe/retry.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <tuple>
#include <type_traits>

namespace dlock::zk::detail {

/// What the caller's cancellation does to the retries of a step.
enum class on_cancel {
  stop,    ///< cuts the pause short and ends the retries with operation_aborted
  ignore,  ///< nothing: for steps that must run to the end (deletes, claims)
};

/// A step's result as a tuple, its error first.
inline auto as_tuple_awaitable() { return asio::as_tuple(asio::use_awaitable); }

/// The same, not bound to the coroutine's cancellation: for the steps a cancel must not interrupt.
/// (A fresh rvalue each time: Asio 1.81's binder does not accept a const token.)
inline auto uncancellable() {
  return asio::bind_cancellation_slot(asio::cancellation_slot(), asio::as_tuple(asio::use_awaitable));
}

/// True once the calling coroutine was cancelled.
asio::awaitable<bool> cancelled();

/// Sleeps `delay` (with jitter); under on_cancel::stop, a cancel cuts it short.
asio::awaitable<void> pause(std::chrono::milliseconds delay, on_cancel mode);

/// Runs `step` (a callable returning an awaitable tuple whose first element
/// is the error_code) until it succeeds, fails with an error that is not
/// retryable, or the policy's retries run out, pausing before each retry.
/// Returns the last try's result; under on_cancel::stop, a cancel seen after
/// a pause ends it with operation_aborted instead.
template <class Step>
auto with_retries(retry_policy policy, on_cancel mode, Step step)
    -> asio::awaitable<typename std::invoke_result_t<Step&>::value_type> {
  retry_counter retries(policy);
  for (;;) {
    auto result = co_await step();
    if (!retries.retry_after(std::get<0>(result))) co_return result;
    // No pause for a cancel that came with the step's result: it would wait
    // out a whole backoff before being seen.
    bool stops = mode == on_cancel::stop;
    if (!(stops && co_await cancelled())) co_await pause(retries.delay(), mode);
    if (stops && co_await cancelled()) {
      std::get<0>(result) = asio::error::operation_aborted;
      co_return result;
    }
  }
}

}  // namespace dlock::zk::detail
