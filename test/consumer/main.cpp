// A user's program, built against an installed dlock (install.consumer,
// test/package/check). It makes a ZooKeeper client and a Redis connection
// (never connected) so the link needs every library dlock uses.
#include <dlock/error.hpp>
#include <dlock/log.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/zk/client.hpp>

#include <boost/asio/io_context.hpp>

#include <iostream>

// What linking dlock::dlock brings, and what it must not force on a user.
static_assert(__cplusplus >= 202002L, "dlock::dlock must bring C++20 (target_compile_features)");
#ifdef BOOST_ASIO_NO_DEPRECATED
#error "dlock must not force BOOST_ASIO_NO_DEPRECATED on its users"
#endif

int main() {
  boost::asio::io_context io;
  {
    dlock::zk::client zk(io.get_executor(), dlock::zk::options{});
    dlock::redis::connection redis(io.get_executor(), dlock::redis::options{});
  }
  io.run();  // the client's close, started by its destructor
  dlock::error_code ec = dlock::error::taken;
  std::cout << ec.category().name() << ": " << ec.message() << "\n";
  return ec == dlock::error::taken ? 0 : 1;
}
