// Helpers shared by the zk client's integration and fault tests.
#pragma once

#include "common/run.hpp"
#include "common/servers.hpp"

#include <dlock/zk/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace dlock::test {

/// How long a test waits for a state or an event before it fails: far beyond
/// any session timeout the tests use, short of the harness's own timeout, so a
/// hang becomes a failure that says what was awaited.
inline constexpr std::chrono::seconds patience{60};

/// Runs `coroutine` (a named coroutine's awaitable) to completion on `io`
/// and rethrows what it threw.
///
/// The io_context is run until the coroutine finishes, not until it runs out
/// of work: a client the test case owns keeps it busy with heartbeats for as
/// long as its session lives, so after a failed check threw out of the
/// coroutine (before its close), io.run() would never return. What is left
/// after a success (closes completing, background work) gets `patience`.
inline void run_coroutine(asio::io_context& io, asio::awaitable<void> coroutine) {
  std::exception_ptr failure;
  bool finished = false;
  asio::co_spawn(io, std::move(coroutine), [&](std::exception_ptr e) {
    failure = e;
    finished = true;
  });
  while (!finished && io.run_one()) {
  }
  BOOST_REQUIRE(finished);
  if (failure) std::rethrow_exception(failure);
  io.run_for(patience);
  if (!io.stopped()) {
    BOOST_ERROR("work left on the io_context " << patience.count() << " s after the test coroutine finished");
    io.stop();
  }
}

inline zk::options zk_options(std::string hosts, std::chrono::milliseconds session_timeout = std::chrono::seconds(10)) {
  zk::options o;
  o.hosts = std::move(hosts);
  o.session_timeout = session_timeout;
  return o;
}

/// Waits until the client reports one of `wanted` (or `closed`, after which
/// none can come), for at most `limit`; returns the state that ended the wait.
/// A state handed to the waiter counts even if the client moved on before the
/// coroutine resumed: `lost` can be followed at once by `connected`.
inline asio::awaitable<zk::session_state> wait_for_any_state(zk::client& c, std::vector<zk::session_state> wanted,
                                                             std::chrono::steady_clock::duration limit = patience) {
  auto is_wanted = [&wanted](zk::session_state s) { return std::find(wanted.begin(), wanted.end(), s) != wanted.end(); };
  asio::steady_timer timer(co_await asio::this_coro::executor, limit);
  for (;;) {
    auto now = c.state();
    if (is_wanted(now) || now == zk::session_state::closed) co_return now;
    auto [order, ec, s, timer_ec] = co_await asio::experimental::make_parallel_group(
        c.wait_state_change(asio::deferred), timer.async_wait(asio::deferred))
        .async_wait(asio::experimental::wait_for_one(), asio::deferred);
    if (order[0] == 1) {
      std::string names;
      for (auto w : wanted) names += (names.empty() ? "" : " or ") + std::string(zk::to_string(w));
      BOOST_ERROR("no " << names << " within " << std::chrono::duration_cast<std::chrono::seconds>(limit).count()
                        << " s: the session is " << zk::to_string(c.state()));
      co_return c.state();
    }
    if (ec) co_return c.state();
    BOOST_TEST_MESSAGE("session state: " << zk::to_string(s));
    if (is_wanted(s)) co_return s;
  }
}

inline asio::awaitable<zk::session_state> wait_for_state(zk::client& c, zk::session_state wanted,
                                                        std::chrono::steady_clock::duration limit = patience) {
  // A named vector: g++ 12 rejects a braced list as an argument inside a coroutine.
  std::vector<zk::session_state> one(1, wanted);
  co_return co_await wait_for_any_state(c, std::move(one), limit);
}

/// `w.wait()` for at most `limit`; past it, fails the check and returns `asio::error::timed_out`.
inline asio::awaitable<std::tuple<error_code, zk::watch_event>> wait_for_event(
    zk::watch& w, std::string what, std::chrono::steady_clock::duration limit = patience) {
  asio::steady_timer timer(co_await asio::this_coro::executor, limit);
  auto [order, ec, event, timer_ec] = co_await asio::experimental::make_parallel_group(
      w.wait(asio::deferred), timer.async_wait(asio::deferred))
      .async_wait(asio::experimental::wait_for_one(), asio::deferred);
  if (order[0] == 0) co_return std::tuple{ec, std::move(event)};
  BOOST_ERROR("no event for the watch on " << what << " within "
                                           << std::chrono::duration_cast<std::chrono::seconds>(limit).count() << " s");
  co_return std::tuple{error_code(asio::error::timed_out), zk::watch_event{}};
}

}  // namespace dlock::test
