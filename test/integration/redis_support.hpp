// Shared by the redis_* tests: options for a test master, and a runner for
// one named test coroutine on a fresh io_context.
#pragma once

#include <common/servers.hpp>
#include <dlock/redis/connection.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <exception>

namespace redis_test {

namespace asio = boost::asio;

inline dlock::redis::options master_options(std::size_t index = 0) {
  auto masters = dlock::test::redis_masters();
  BOOST_REQUIRE_GT(masters.size(), index);
  dlock::redis::options o;
  o.host = masters[index].host;
  o.port = masters[index].port;
  return o;
}

/// Runs `body(executor)` until it and everything it started are done;
/// rethrows what it threw (so BOOST_REQUIRE inside it fails the test).
inline void run(asio::awaitable<void> (*body)(asio::any_io_executor)) {
  asio::io_context io;
  std::exception_ptr failure;
  bool finished = false;
  asio::co_spawn(io, body(io.get_executor()), [&](std::exception_ptr e) {
    failure = e;
    finished = true;
  });
  io.run();
  BOOST_REQUIRE(finished);
  if (failure) std::rethrow_exception(failure);
}

}  // namespace redis_test
