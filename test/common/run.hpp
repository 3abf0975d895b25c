// Running a test coroutine, and the small helpers most test coroutines use:
// one copy for every test program (they were copied into each file).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/test/unit_test.hpp>

#include "common/await.hpp"

#include <chrono>
#include <exception>
#include <utility>

namespace dlock::test {

/// Runs `body` on `io` until `io` runs out of work. What `body` throws leaves
/// `io.run()` at once, so a failed check fails the test even while a client
/// it left open would keep the io_context busy; a body that never finishes
/// fails it too.
inline void run(boost::asio::io_context& io, boost::asio::awaitable<void> body) {
  bool done = false;
  boost::asio::co_spawn(io, std::move(body), [&](std::exception_ptr e) {
    done = true;
    if (e) std::rethrow_exception(e);
  });
  io.run();
  BOOST_REQUIRE(done);
}

/// `run` on a fresh io_context.
inline void run(boost::asio::awaitable<void> body) {
  boost::asio::io_context io;
  run(io, std::move(body));
}

/// `run` of `body(executor)` on a fresh io_context.
inline void run(boost::asio::awaitable<void> (*body)(boost::asio::any_io_executor)) {
  boost::asio::io_context io;
  run(io, body(io.get_executor()));
}

}  // namespace dlock::test
