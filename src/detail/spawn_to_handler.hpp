// Runs a coroutine that returns `std::tuple<error_code, T...>` and completes
// an `any_completion_handler<void(error_code, T...)>` with its result.
//
// Recipes whose cost is dominated by server round trips are easiest to read
// as coroutines; this is the one place that adapts them to the completion-
// token model: the handler's cancellation slot reaches the coroutine
// (terminal and partial), the handler runs on its own associated executor,
// and an exception escaping the coroutine becomes an error_code.
#pragma once

#include <dlock/config.hpp>
#include <dlock/error.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/system/system_error.hpp>

#include <exception>
#include <new>
#include <tuple>
#include <utility>

namespace dlock::detail {

template <class... T>
struct spawn_completion {
  asio::any_completion_handler<void(error_code, T...)> handler;

  void operator()(std::exception_ptr failure, std::tuple<error_code, T...> result) {
    if (failure) std::get<0>(result) = to_error_code(failure);
    std::apply(
        [this](error_code ec, T... values) {
          asio::dispatch(asio::append(std::move(handler), ec, std::move(values)...));
        },
        std::move(result));
  }

  static error_code to_error_code(const std::exception_ptr& failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const boost::system::system_error& e) {
      return e.code();
    } catch (const std::bad_alloc&) {
      return make_error_code(boost::system::errc::not_enough_memory);
    } catch (...) {
      return make_error_code(boost::system::errc::state_not_recoverable);
    }
  }
};

template <class... T>
void spawn_to_handler(const asio::any_io_executor& executor,
                      asio::awaitable<std::tuple<error_code, T...>> body,
                      asio::any_completion_handler<void(error_code, T...)> handler) {
  auto slot = asio::get_associated_cancellation_slot(handler);
  asio::co_spawn(executor, std::move(body),
                 asio::bind_cancellation_slot(slot, spawn_completion<T...>{std::move(handler)}));
}

}  // namespace dlock::detail
