// A program that execs children (like the dlock command) must not hand them
// its ZooKeeper or Redis connections: every socket dlock holds is
// close-on-exec (Asio and the ZooKeeper C client open theirs without it).
#include "common/servers.hpp"
#include "integration/redis_support.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/redis/connection.hpp>
#include <dlock/zk/client.hpp>

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <string>

#include <fcntl.h>
#include <unistd.h>

namespace asio = boost::asio;

namespace {

// Sockets open in this process that a child would inherit.
int inheritable_sockets(int& sockets) {
  int inheritable = 0;
  sockets = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (ec || target.string().rfind("socket:", 0) != 0) continue;
    ++sockets;
    int fd = std::stoi(entry.path().filename().string());
    int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && !(flags & FD_CLOEXEC)) ++inheritable;
  }
  return inheritable;
}

asio::awaitable<void> connections_are_close_on_exec(asio::any_io_executor ex) {
  int before = 0;
  inheritable_sockets(before);
  dlock::zk::client zk(ex, dlock::test::zk_options(dlock::test::zk_hosts()));
  co_await zk.connect();
  dlock::redis::connection redis(ex, redis_test::master_options());
  co_await redis.connect();
  int sockets = 0;
  int inheritable = inheritable_sockets(sockets);
  BOOST_CHECK_GE(sockets, before + 3);  // the C client's, dlock's copy of it, and Redis's
  BOOST_CHECK_EQUAL(inheritable, 0);
  co_await zk.close();
  redis.close();
}

}  // namespace

BOOST_AUTO_TEST_CASE(zookeeper_and_redis_sockets_are_close_on_exec) { redis_test::run(&connections_are_close_on_exec); }
