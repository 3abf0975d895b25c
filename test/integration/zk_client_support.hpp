// Helpers shared by the zk client's integration and fault tests.
#pragma once

#include "common/servers.hpp"

#include <dlock/zk/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <exception>
#include <optional>

namespace dlock::test {

/// Runs `coroutine` (a named coroutine's awaitable) to completion on a fresh
/// io_context and rethrows what it threw.
inline void run_coroutine(asio::io_context& io, asio::awaitable<void> coroutine) {
  std::exception_ptr failure;
  bool finished = false;
  asio::co_spawn(io, std::move(coroutine), [&](std::exception_ptr e) {
    failure = e;
    finished = true;
  });
  io.run();
  BOOST_REQUIRE(finished);
  if (failure) std::rethrow_exception(failure);
}

inline zk::options zk_options(std::string hosts, std::chrono::milliseconds session_timeout = std::chrono::seconds(10)) {
  zk::options o;
  o.hosts = std::move(hosts);
  o.session_timeout = session_timeout;
  return o;
}

/// Waits until the client reports `wanted` (or a state in which it can no longer come).
inline asio::awaitable<zk::session_state> wait_for_state(zk::client& c, zk::session_state wanted) {
  while (c.state() != wanted && c.state() != zk::session_state::closed) {
    auto [ec, s] = co_await c.wait_state_change(asio::as_tuple(asio::deferred));
    BOOST_TEST_MESSAGE("session state: " << zk::to_string(s));
    if (ec) break;
  }
  co_return c.state();
}

inline asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::deferred);
}

}  // namespace dlock::test
