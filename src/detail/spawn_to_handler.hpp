// Runs a coroutine that returns `std::tuple<error_code, T...>` and completes
// an `any_completion_handler<void(error_code, T...)>` with its result.
//
// Recipes whose cost is dominated by server round trips are easiest to read
// as coroutines; this is the one place that adapts them to the completion-
// token model: the handler's cancellation slot reaches the coroutine
// (see co_spawn_for), the handler runs on its own associated executor, and an
// exception escaping the coroutine becomes an error_code.
#pragma once

#include "detail/op_base.hpp"

#include <dlock/config.hpp>
#include <dlock/detail/co_spawn_for.hpp>
#include <dlock/error.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/dispatch.hpp>

#include <exception>
#include <tuple>
#include <utility>

namespace dlock::detail {

template <class... T>
struct spawn_completion {
  asio::any_completion_handler<void(error_code, T...)> handler;

  void operator()(std::exception_ptr failure, std::tuple<error_code, T...> result) {
    if (failure) std::get<0>(result) = error_from(failure);
    std::apply(
        [this](error_code ec, T... values) {
          asio::dispatch(asio::append(std::move(handler), ec, std::move(values)...));
        },
        std::move(result));
  }
};

template <class... T>
void spawn_to_handler(const asio::any_io_executor& executor,
                      asio::awaitable<std::tuple<error_code, T...>> body,
                      asio::any_completion_handler<void(error_code, T...)> handler) {
  auto slot = asio::get_associated_cancellation_slot(handler);
  co_spawn_for(executor, std::move(body), slot, spawn_completion<T...>{std::move(handler)});
}

}  // namespace dlock::detail
