// A queue's offers and takes, told to its observer (dlock/observer.hpp):
// the operation's body, timed and reported when it ends. A queue with no
// observer runs its bodies as they are, without this extra frame.
#pragma once

#include "queue_steps.hpp"

#include <dlock/error.hpp>

#include <chrono>
#include <optional>
#include <tuple>
#include <type_traits>

namespace dlock::zk::detail {

enum class queue_event { offered, taken };

template <class T>
inline constexpr bool is_optional = false;
template <class T>
inline constexpr bool is_optional<std::optional<T>> = true;

template <class Result>
asio::awaitable<Result> reported(queue_state_ptr q, queue_event event, asio::awaitable<Result> body) {
  auto started = std::chrono::steady_clock::now();
  auto result = co_await std::move(body);
  error_code outcome = std::get<0>(result);
  // poll() finding nothing: for the observer, an empty take.
  if constexpr (is_optional<std::tuple_element_t<1, Result>>)
    if (!outcome && !std::get<1>(result)) outcome = dlock::error::empty;
  auto took = std::chrono::steady_clock::now() - started;
  if (event == queue_event::offered) q->observer->on_queue_offered({q->path, outcome, took});
  else q->observer->on_queue_taken({q->path, outcome, took});
  co_return result;
}

/// `body`, reported if the queue has an observer.
template <class Result>
asio::awaitable<Result> maybe_reported(const queue_state_ptr& q, queue_event event, asio::awaitable<Result> body) {
  if (!q->observer) return body;
  return reported(q, event, std::move(body));
}

}  // namespace dlock::zk::detail
