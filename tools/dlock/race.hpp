// Waiting for an operation, a --timeout and dlock's stop signals at once.
#pragma once

#include <dlock/config.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <exception>
#include <optional>

namespace dlock::cli {

/// How a raced operation ended.
enum class race_end { operation, timeout, signal };

/// Which of the three finished first, from a parallel group's order array.
inline race_end first_finished(std::size_t index) {
  return index == 0 ? race_end::operation : index == 1 ? race_end::timeout : race_end::signal;
}

/// Arms `timer` for `timeout`, or forever without one.
inline void arm(asio::steady_timer& timer, std::optional<std::chrono::milliseconds> timeout) {
  if (timeout) timer.expires_after(*timeout);
  else timer.expires_at(asio::steady_timer::time_point::max());
}

/// Runs `operation` (a deferred async operation) against `timer` and
/// `signals`; the first to finish cancels the others. Completes (as an
/// awaitable) with the group's tuple: the order array, then the operation's
/// results, the timer's error_code, the signal's error_code and number.
template <class Operation>
auto race(Operation operation, asio::steady_timer& timer, asio::signal_set& signals) {
  namespace ex = asio::experimental;
  return ex::make_parallel_group(std::move(operation), timer.async_wait(asio::deferred),
                                 signals.async_wait(asio::deferred))
      .async_wait(ex::wait_for_one(), asio::use_awaitable);
}

/// How waiting for something other than the lock (connecting) ended: it
/// finished (race_end::operation, with `failure` if it threw), the timeout
/// ran out, or signal `signo` came.
struct wait_end {
  race_end end = race_end::operation;
  int signo = 0;
  std::exception_ptr failure;
};

/// Runs `connecting` unless `deadline` (the --timeout, armed when dlock
/// started) or a signal in `stop` comes first. Connecting thus counts
/// against --timeout like the wait for the lock.
inline asio::awaitable<wait_end> connect_within(asio::awaitable<void> connecting, asio::steady_timer& deadline,
                                                asio::signal_set& stop) {
  auto executor = co_await asio::this_coro::executor;
  auto [order, failed, timer_ec, signal_ec, signo] =
      co_await race(asio::co_spawn(executor, std::move(connecting), asio::deferred), deadline, stop);
  auto end = first_finished(order[0]);
  co_return wait_end{end, signo, end == race_end::operation ? failed : nullptr};
}

}  // namespace dlock::cli
