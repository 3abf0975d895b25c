// Shared by the redis_* tests: options for a test master, and the runner
// for one named test coroutine on a fresh io_context (test/common/run.hpp).
#pragma once

#include <common/run.hpp>
#include <common/servers.hpp>
#include <dlock/redis/connection.hpp>

#include <boost/test/unit_test.hpp>

namespace redis_test {

namespace asio = boost::asio;
using dlock::test::run;

inline dlock::redis::options master_options(std::size_t index = 0) {
  auto masters = dlock::test::redis_masters();
  BOOST_REQUIRE_GT(masters.size(), index);
  dlock::redis::options o;
  o.host = masters[index].host;
  o.port = masters[index].port;
  return o;
}

}  // namespace redis_test
