#include "dlock/supervise.hpp"

#include "dlock/exit_status.hpp"
#include "dlock/run.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <csignal>

namespace dlock::cli {
namespace {

// Waits until cancelled: keeps a finished helper from ending the group early.
asio::awaitable<void> wait_until_cancelled() {
  asio::steady_timer never(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
  co_await never.async_wait(asio::use_awaitable);
}

asio::awaitable<void> forward_signals(child_process* child, asio::signal_set* signals) {
  for (;;) {
    int signo = co_await signals->async_wait(asio::use_awaitable);
    child->signal(signo);
  }
}

asio::awaitable<void> stop_child_on_loss(child_process* child, lock_loss* loss, std::chrono::milliseconds grace,
                                         bool* lost) {
  auto [reason] = co_await loss->wait(asio::as_tuple(asio::use_awaitable));
  if (reason && reason != asio::error::operation_aborted) {
    *lost = true;
    print_error("lost the lock (" + reason.message() + "): sending SIGTERM to the command");
    child->signal(SIGTERM);
    asio::steady_timer timer(co_await asio::this_coro::executor, grace);
    co_await timer.async_wait(asio::use_awaitable);
    if (!child->exited()) print_error("the command outlived its grace period: sending SIGKILL");
    child->signal(SIGKILL);
  }
  co_await wait_until_cancelled();
}

}  // namespace

asio::awaitable<int> supervise(child_process& child, lock_loss& loss, asio::signal_set& forwarded,
                               std::chrono::milliseconds grace) {
  namespace ex = asio::experimental;
  auto executor = co_await asio::this_coro::executor;
  bool lost = false;
  // The child's exit ends the group; the helpers only ever end by cancellation.
  auto group = ex::make_parallel_group(
      asio::co_spawn(executor, child.wait_for_exit(), asio::deferred),
      asio::co_spawn(executor, forward_signals(&child, &forwarded), asio::deferred),
      asio::co_spawn(executor, stop_child_on_loss(&child, &loss, grace, &lost), asio::deferred));
  auto [order, exit_failure, wait_status, forward_failure, loss_failure] =
      co_await group.async_wait(ex::wait_for_one(), asio::use_awaitable);
  if (exit_failure) std::rethrow_exception(exit_failure);
  co_return exit_status::for_supervised(lost, wait_status);
}

}  // namespace dlock::cli
