// When a holder is told its ZooKeeper lock is lost, compared with when the
// servers can give the lock to someone else (safety review F7). The holder
// talks through a proxy that is then black-holed: a silent partition, no
// reset, so the C client notices only by its own receive timeout. A contender
// on a direct connection waits for the lock; it gets it once the servers
// expired the holder's session. The property is an order of two events, not
// a duration: the holder must hear of the loss no later than the contender is
// granted the lock.
#include "common/zk_cutting_proxy.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/error.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

using namespace dlock;
using namespace std::chrono_literals;
using dlock::test::run_coroutine;
using dlock::test::sleep_for;
using clock_type = std::chrono::steady_clock;
constexpr auto tuple = asio::as_tuple(asio::deferred);

namespace {

// Short sessions keep the test quick (the servers' tickTime is 500 ms).
constexpr std::chrono::milliseconds session_timeout{4000};

std::string lock_path(const std::string& name) { return "/dlock-test/locks/" + dlock::test::unique_name(name); }

struct outcome {
  std::optional<clock_type::time_point> at;
  error_code ec;
};

asio::awaitable<void> acquire_into(zk::mutex& m, std::shared_ptr<outcome> result) {
  auto [ec] = co_await m.acquire(tuple);
  result->ec = ec;
  result->at = clock_type::now();
}

asio::awaitable<void> wait_loss(zk::mutex& m, std::shared_ptr<outcome> result) {
  auto [ec] = co_await m.loss().wait(tuple);
  result->ec = ec;
  result->at = clock_type::now();
}

long long ms_between(clock_type::time_point from, clock_type::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

// `holder_server`: the server the holder reaches through the proxy;
// `contender_hosts`: what the contender connects to directly.
asio::awaitable<void> loss_reported_before_the_lock_moves(std::string holder_server, std::string contender_hosts,
                                                          zk::loss_policy policy) {
  auto ex = co_await asio::this_coro::executor;
  dlock::test::zk_cutting_proxy proxy(holder_server);
  zk::client holder_zk(ex, dlock::test::zk_options(proxy.address(), session_timeout));
  zk::client contender_zk(ex, dlock::test::zk_options(contender_hosts, session_timeout));
  co_await holder_zk.connect();
  co_await contender_zk.connect();
  auto timeout = holder_zk.negotiated_session_timeout();
  BOOST_TEST_MESSAGE("negotiated session timeout " << timeout.count() << " ms");

  auto path = lock_path("loss-timing");
  zk::lock_options options;
  options.policy = policy;
  zk::mutex holder(holder_zk, path, options);
  zk::mutex contender(contender_zk, path);
  co_await holder.acquire();
  auto holder_loss = std::make_shared<outcome>();
  auto contender_got = std::make_shared<outcome>();
  asio::co_spawn(ex, wait_loss(holder, holder_loss), asio::detached);
  asio::co_spawn(ex, acquire_into(contender, contender_got), asio::detached);
  co_await sleep_for(300ms);  // the contender is queued behind the holder
  BOOST_REQUIRE(!contender_got->at);

  auto partitioned = clock_type::now();
  proxy.black_hole(true);
  auto limit = partitioned + dlock::test::patience;
  while ((!holder_loss->at || !contender_got->at) && clock_type::now() < limit) co_await sleep_for(5ms);
  BOOST_REQUIRE(holder_loss->at);
  BOOST_REQUIRE(contender_got->at);
  BOOST_TEST(!contender_got->ec, contender_got->ec.message());
  BOOST_TEST(holder_loss->ec, "the loss carries its reason");
  BOOST_TEST_MESSAGE("after the partition: holder told at " << ms_between(partitioned, *holder_loss->at)
                                                             << " ms, contender granted at "
                                                             << ms_between(partitioned, *contender_got->at) << " ms");
  BOOST_TEST((*holder_loss->at <= *contender_got->at),
             "the holder learnt of the loss " << ms_between(*contender_got->at, *holder_loss->at)
                                              << " ms after the lock was granted to another session");

  proxy.black_hole(false);
  co_await holder.release(tuple);  // reports the loss; nothing left to remove
  co_await contender.release();
  co_await holder_zk.close();
  co_await contender_zk.close();
}

std::string first_member() {
  auto ensemble = dlock::test::zk_ensemble();
  return ensemble.substr(0, ensemble.find(','));
}

std::string second_member() {
  auto ensemble = dlock::test::zk_ensemble();
  auto rest = ensemble.substr(ensemble.find(',') + 1);
  return rest.substr(0, rest.find(','));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_loss_timing)

// F7: under loss_policy::session the lost timer used to start when the C
// client reported the disconnect (2/3 of the timeout after the last reply,
// for a silent partition) and run a whole timeout: about 0.6 T late.
BOOST_AUTO_TEST_CASE(session_policy_reports_the_loss_before_the_standalone_server_moves_the_lock) {
  asio::io_context io;
  run_coroutine(io, loss_reported_before_the_lock_moves(dlock::test::zk_hosts(), dlock::test::zk_hosts(),
                                                        zk::loss_policy::session));
}

BOOST_AUTO_TEST_CASE(session_policy_reports_the_loss_before_the_ensemble_moves_the_lock) {
  asio::io_context io;
  run_coroutine(io, loss_reported_before_the_lock_moves(first_member(), second_member(), zk::loss_policy::session));
}

// The default policy reports the suspension, at most 2/3 T after the last reply.
BOOST_AUTO_TEST_CASE(standard_policy_reports_the_suspension_before_the_ensemble_moves_the_lock) {
  asio::io_context io;
  run_coroutine(io, loss_reported_before_the_lock_moves(first_member(), second_member(), zk::loss_policy::standard));
}

BOOST_AUTO_TEST_SUITE_END()
