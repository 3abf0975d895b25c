// dlock and Apache Curator share one semaphore: two Curator InterProcessSemaphoreV2
// contenders (test/interop/CuratorSemaphoreContender.java, one JVM) and three
// dlock zk::semaphore contenders on one path and one maximum. Both sides
// keep one ephemeral marker per lease held under PATH-inside and list them:
// more than the maximum means the mixed fleet over-granted.
#include "common/curator_process.hpp"
#include "common/servers.hpp"
#include "common/zk.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/zk/client.hpp>
#include <dlock/zk/error.hpp>
#include <dlock/zk/semaphore.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <memory>
#include <vector>

using namespace dlock;
using namespace std::chrono_literals;
using dlock::test::run_coroutine;
using dlock::test::sleep_for;
using dlock::test::with_ec;

namespace {

constexpr std::size_t max_leases = 3;

struct tally {
  int rounds = 0;
  int overfull = 0;
  int rounds_beside_curator = 0;  // rounds that saw a Curator holder's marker
  int failures = 0;
};

struct fleet_state {
  bool stop = false;
  int running = 0;
};

// One dlock contender: rounds until told to stop.
asio::awaitable<void> contend(zk::client& zk, std::string path, std::size_t n, std::shared_ptr<tally> t,
                              std::shared_ptr<fleet_state> fleet) {
  zk::semaphore s(zk, path, max_leases);
  auto inside = path + "-inside";
  while (!fleet->stop) {
    co_await s.acquire(n);
    std::vector<std::string> markers;
    for (std::size_t k = 0; k < n; ++k)
      markers.push_back((co_await zk.create(inside + "/m-", "", zk::create_mode::ephemeral_sequential)).path);
    auto [ec, children, st] = co_await zk.get_children(inside, with_ec);
    if (!ec && children.size() > max_leases) ++t->overfull;
    // Curator's markers are "c-", ours "m-": one of theirs here means a
    // Curator contender held leases at the same time as we did.
    if (!ec && std::any_of(children.begin(), children.end(), [](const std::string& c) { return c.starts_with("c-"); }))
      ++t->rounds_beside_curator;
    co_await sleep_for(3ms);
    for (auto& m : markers) co_await zk.remove(m);
    co_await s.release();
    ++t->rounds;
  }
}

asio::awaitable<void> mixed_fleet() {
  auto ex = co_await asio::this_coro::executor;
  auto path = "/dlock-test/interop/" + dlock::test::unique_name("semaphore");
  zk::client zk(ex, dlock::test::zk_options(dlock::test::zk_hosts()));
  co_await zk.connect();
  co_await zk.create("/dlock-test", "", zk::create_mode::persistent, with_ec);
  co_await zk.create("/dlock-test/interop", "", zk::create_mode::persistent, with_ec);
  co_await zk.create(path + "-inside", "", zk::create_mode::persistent);

  dlock::test::curator_process curator("CuratorSemaphoreContender", {path, std::to_string(max_leases), "40"});
  auto t = std::make_shared<tally>();
  auto fleet = std::make_shared<fleet_state>();
  std::vector<std::unique_ptr<zk::client>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<zk::client>(ex, dlock::test::zk_options(dlock::test::zk_hosts())));
    co_await clients.back()->connect();
    ++fleet->running;
    asio::co_spawn(ex, contend(*clients.back(), path, i == 2 ? 2 : 1, t, fleet), [fleet, t](std::exception_ptr e) {
      --fleet->running;
      if (e) ++t->failures;
    });
  }
  // Contend for as long as Curator runs (it first compiles and connects).
  for (int i = 0; i < 30000 && !curator.finished(); ++i) co_await sleep_for(10ms);
  fleet->stop = true;
  for (int i = 0; i < 3000 && fleet->running > 0; ++i) co_await sleep_for(10ms);
  BOOST_REQUIRE(curator.finished());
  BOOST_TEST(fleet->running == 0);
  auto out = curator.output();
  BOOST_TEST_MESSAGE("curator: " << out);
  BOOST_TEST(curator.status() == 0, out);
  BOOST_TEST(out.find("DONE 40") != std::string::npos, out);
  BOOST_TEST_MESSAGE("dlock rounds: " << t->rounds << ", beside Curator: " << t->rounds_beside_curator);
  BOOST_TEST(t->overfull == 0);
  BOOST_TEST(t->failures == 0);
  BOOST_TEST(t->rounds > 0);
  BOOST_TEST(t->rounds_beside_curator > 0, "the two really contended");
  auto [ec, leases, st] = co_await zk.get_children(path + "/leases", with_ec);
  BOOST_TEST(leases.empty(), "nothing left behind");
  for (auto& c : clients) co_await c->close();
  co_await dlock::test::delete_tree(zk, path);
  co_await dlock::test::delete_tree(zk, path + "-inside");
  co_await zk.close();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_semaphore_interop)

BOOST_AUTO_TEST_CASE(curator_and_dlock_never_hold_more_than_the_maximum) {
  asio::io_context io;
  run_coroutine(io, mixed_fleet());
}

BOOST_AUTO_TEST_SUITE_END()
