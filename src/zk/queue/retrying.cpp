#include "retrying.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

namespace dlock::zk::detail {

asio::awaitable<bool> cancelled() {
  auto state = co_await asio::this_coro::cancellation_state;
  co_return state.cancelled() != asio::cancellation_type::none;
}

asio::awaitable<void> pause(std::chrono::milliseconds delay, on_cancel mode) {
  asio::steady_timer timer(co_await asio::this_coro::executor, with_jitter(delay));
  if (mode == on_cancel::stop)
    co_await timer.async_wait(as_tuple_awaitable());
  else
    co_await timer.async_wait(uncancellable());
}

}  // namespace dlock::zk::detail
