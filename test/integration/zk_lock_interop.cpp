// dlock and Apache Curator contend for one lock path: a Curator
// InterProcessMutex (or InterProcessReadWriteLock write lock), run with
// `java` from test/interop/CuratorContender.java, against dlock's mutex (or
// reader and writer). Each side creates the ephemeral node PATH-inside while
// it holds: a NODEEXISTS there means the two held at once.
#include "common/curator_process.hpp"
#include "common/servers.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/zk/client.hpp>
#include <dlock/zk/error.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/shared_mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

using namespace dlock;
using namespace std::chrono_literals;
using dlock::test::run_coroutine;
using dlock::test::sleep_for;

namespace {

struct tally {
  int rounds = 0;
  int overlaps = 0;
};

asio::awaitable<void> hold_once(zk::client& zk, zk::mutex& m, std::string inside, tally& t) {
  co_await m.acquire();
  auto [ec, made] = co_await zk.create(inside, "dlock", zk::create_mode::ephemeral, asio::as_tuple(asio::deferred));
  if (ec == zk::error::node_exists) ++t.overlaps;
  co_await sleep_for(5ms);
  if (!ec) co_await zk.remove(inside);
  co_await m.release();
  ++t.rounds;
}

asio::awaitable<void> contend_with_curator(std::string kind) {
  auto ex = co_await asio::this_coro::executor;
  zk::client zk(ex, dlock::test::zk_options(dlock::test::zk_hosts()));
  co_await zk.connect();
  auto path = "/dlock-test/interop/" + dlock::test::unique_name(kind);
  auto inside = path + "-inside";
  zk::mutex mutex(zk, path);
  zk::shared_mutex rw(zk, path);

  dlock::test::curator_process curator("CuratorContender", {path, kind, "60"});
  tally t;
  // Contend for as long as Curator runs (it first compiles and connects).
  int rounds_while_curator_held = 0;
  while (!curator.finished()) {
    if (kind == "mutex") {
      co_await hold_once(zk, mutex, inside, t);
    } else {
      co_await hold_once(zk, rw.reader(), inside, t);
      co_await hold_once(zk, rw.writer(), inside, t);
    }
    auto [ec, children, st] = co_await zk.get_children(path, asio::as_tuple(asio::deferred));
    if (!ec && !children.empty()) ++rounds_while_curator_held;
  }
  auto out = curator.output();
  BOOST_TEST_MESSAGE("curator (" << kind << "): " << out << "dlock rounds: " << t.rounds);
  BOOST_TEST(curator.status() == 0, out);
  BOOST_TEST(out.find("DONE 60") != std::string::npos, out);
  BOOST_TEST(t.overlaps == 0);
  BOOST_TEST(t.rounds > 0);
  BOOST_TEST(rounds_while_curator_held > 0, "the two really contended");
  co_await zk.close();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_lock_interop)

BOOST_AUTO_TEST_CASE(curator_mutex_and_dlock_mutex_never_overlap) {
  asio::io_context io;
  run_coroutine(io, contend_with_curator("mutex"));
}

BOOST_AUTO_TEST_CASE(curator_write_lock_and_dlock_read_write_never_overlap) {
  asio::io_context io;
  run_coroutine(io, contend_with_curator("write"));
}

BOOST_AUTO_TEST_SUITE_END()
