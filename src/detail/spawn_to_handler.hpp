// Runs a coroutine that returns `std::tuple<error_code, T...>` and completes
// an `any_completion_handler<void(error_code, T...)>` with its result.
//
// Recipes whose cost is dominated by server round trips are easiest to read
// as coroutines; this is the one place that adapts them to the completion-
// token model: the handler's cancellation slot reaches the coroutine
// (terminal and partial) through the one operation base, the handler runs on
// its own associated executor, and an exception escaping the coroutine
// becomes an error_code.
#pragma once

#include "detail/op_base.hpp"

#include <dlock/config.hpp>
#include <dlock/error.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>

#include <atomic>
#include <exception>
#include <memory>
#include <tuple>
#include <utility>

namespace dlock::detail {

/// The coroutine's own cancellation signal, shared by the forwarder on the
/// caller's slot and by the completion. Asio 1.81's co_spawn forwards a
/// slot's signal by posting a raw pointer into the slot's memory: a caller
/// that destroys its signal as the operation completes (a timer racing it)
/// leaves that post to emit on freed memory. The forward here holds the
/// signal by a share, and emits only while the coroutine has not finished.
struct spawn_cancellation {
  asio::cancellation_signal signal;
  std::atomic<bool> finished{false};
};

template <class... T>
struct spawn_completion {
  op_base<void(error_code, T...)> op;
  asio::any_io_executor executor;
  std::shared_ptr<spawn_cancellation> cancellation;  // null when the caller's handler has no slot

  // Runs on `executor` (co_spawn's completion), where forwards are emitted.
  void operator()(std::exception_ptr failure, std::tuple<error_code, T...> result) {
    if (cancellation) cancellation->finished = true;
    if (failure) std::get<0>(result) = error_from(failure);
    std::apply(
        [this](error_code ec, T... values) { op.complete(completion::dispatch, executor, ec, std::move(values)...); },
        std::move(result));
  }
};

template <class... T>
void spawn_to_handler(const asio::any_io_executor& executor,
                      asio::awaitable<std::tuple<error_code, T...>> body,
                      asio::any_completion_handler<void(error_code, T...)> handler) {
  spawn_completion<T...> done{op_base<void(error_code, T...)>(std::move(handler)), executor, nullptr};
  if (!done.op.handler_slot().is_connected()) return asio::co_spawn(executor, std::move(body), std::move(done));
  auto cancellation = std::make_shared<spawn_cancellation>();
  done.op.hook_cancellation(
      executor,
      [cancellation](asio::cancellation_type type) {
        if (!cancellation->finished) cancellation->signal.emit(type);  // on `executor`: co_spawn's forward runs here
      },
      forwarding::dispatch);
  auto slot = cancellation->signal.slot();
  done.cancellation = std::move(cancellation);
  asio::co_spawn(executor, std::move(body), asio::bind_cancellation_slot(slot, std::move(done)));
}

}  // namespace dlock::detail
