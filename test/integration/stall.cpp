// dlock::stall_monitor against the real servers: a handler that blocks the
// io_context longer than a hold's margin makes a Redis holder report its loss
// before its validity would have run out by the clock, and a ZooKeeper holder
// (a mutex, or a semaphore's lease) under loss_policy::standard report a
// suspension; under loss_policy::session the same stall loses nothing (the
// session outlives it).
#include "integration/redis_support.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/error.hpp>
#include <dlock/observer.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/stall_monitor.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/semaphore.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>

namespace asio = boost::asio;
namespace redis = dlock::redis;
namespace zk = dlock::zk;
using dlock::error_code;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

constexpr auto with_ec = asio::as_tuple(asio::deferred);

struct stall_counter final : dlock::observer {
  std::atomic<int> stalls{0};
  std::atomic<std::int64_t> last_lag_ms{0};
  std::atomic<int> lost_to_stall{0};
  void on_stall(const dlock::stall_detected& e) noexcept override {
    ++stalls;
    last_lag_ms = std::chrono::duration_cast<std::chrono::milliseconds>(e.lag).count();
  }
  void on_hold_ended(const dlock::hold_ended& e) noexcept override {
    if (e.reason == dlock::error::stalled) ++lost_to_stall;
  }
};

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(with_ec);
}

// The stall: a handler that blocks the thread running the io_context.
void block_the_loop(asio::any_io_executor ex, std::chrono::milliseconds how_long) {
  asio::post(ex, [how_long] { std::this_thread::sleep_for(how_long); });
}

dlock::stall_options looking() {
  dlock::stall_options o;
  o.period = 20ms;
  o.threshold = 50ms;
  return o;
}

// --- Redis ---

asio::awaitable<void> redis_holder_loses_to_a_stall() {
  auto ex = co_await asio::this_coro::executor;
  auto seen = std::make_shared<stall_counter>();
  auto options = looking();
  options.observer = seen;
  auto monitor = std::make_shared<dlock::stall_monitor>(ex, options);
  auto o = redis_test::master_options();
  o.stall = monitor;
  o.observer = seen;
  redis::connection conn(ex, o);
  co_await conn.connect();

  redis::lock_options lo;
  lo.ttl = 1000ms;
  redis::lock l(conn, dlock::test::unique_name("dlock-test:stall"), lo);
  auto [ec] = co_await l.acquire(with_ec);
  BOOST_REQUIRE(!ec);
  auto acquired = steady::now();
  auto validity_at_start = l.validity();
  co_await sleep_for(100ms);
  block_the_loop(ex, 600ms);  // ends about 700 ms into the hold: 290 ms of validity left, less than the stall
  auto [reason] = co_await l.loss().wait(with_ec);
  auto lost_after = steady::now() - acquired;
  BOOST_TEST((reason == dlock::error::stalled), reason.message());
  BOOST_TEST(lost_after < validity_at_start,
             "lost " << lost_after / 1ms << " ms into the hold, its validity was " << validity_at_start.count() << " ms");
  BOOST_TEST(seen->stalls >= 1);
  BOOST_TEST(seen->last_lag_ms >= 500);
  BOOST_TEST(seen->lost_to_stall == 1);
  BOOST_TEST(monitor->stalls() >= 1u);
  auto [released] = co_await l.release(with_ec);
  BOOST_TEST((released == dlock::error::stalled));

  // A hold with room for the stall keeps going, its validity less the margin.
  lo.ttl = 10s;
  redis::lock roomy(conn, dlock::test::unique_name("dlock-test:stall-roomy"), lo);
  co_await roomy.acquire();
  block_the_loop(ex, 300ms);
  co_await sleep_for(100ms);
  BOOST_TEST(roomy.held());
  BOOST_TEST(roomy.validity() < 10s - 300ms, "the stall's lateness is kept as a margin");
  co_await roomy.release();
  conn.close();
}

// --- ZooKeeper ---

// The holders: a mutex, and a semaphore's one lease (its own stall watch,
// the same rule; its `locks` mutex is held only while acquiring).
std::unique_ptr<zk::mutex> make_holder(zk::client& client, const std::string& path, zk::loss_policy policy,
                                       zk::mutex*) {
  zk::lock_options lo;
  lo.policy = policy;
  lo.stall_fraction = 0.1;
  return std::make_unique<zk::mutex>(client, path, lo);
}
std::unique_ptr<zk::semaphore> make_holder(zk::client& client, const std::string& path, zk::loss_policy policy,
                                           zk::semaphore*) {
  zk::semaphore_options so;
  so.policy = policy;
  so.stall_fraction = 0.1;
  return std::make_unique<zk::semaphore>(client, path, 2, so);
}

template <class Holder>
asio::awaitable<void> zk_holder_suspends_on_a_stall(zk::loss_policy policy) {
  auto ex = co_await asio::this_coro::executor;
  auto monitor = std::make_shared<dlock::stall_monitor>(ex, looking());
  auto o = dlock::test::zk_options(dlock::test::zk_hosts(), 6s);
  o.stall = monitor;
  zk::client client(ex, o);
  co_await client.connect();
  auto timeout = client.negotiated_session_timeout();
  auto path = "/dlock-test/stall/" + dlock::test::unique_name("holder");
  auto h = make_holder(client, path, policy, static_cast<Holder*>(nullptr));
  co_await h->acquire();
  auto session = client.session_id();
  // Over the fraction, and short enough that the connection stays up (the
  // client notices a silent server after 2/3 of the timeout, and may have
  // last heard from it a third of the timeout before the stall).
  auto stall = std::chrono::duration_cast<std::chrono::milliseconds>(timeout * 0.2);
  block_the_loop(ex, stall);
  co_await sleep_for(200ms);
  BOOST_TEST(monitor->stalls() >= 1u);
  // A round trip through the client's strand: whatever the stall queued
  // there (the holder's verdict) has run when it completes.
  co_await client.exists(path, with_ec);
  if (policy == zk::loss_policy::standard) {
    // The monitor's late timer and this sleep expire during the same stall,
    // and the holder learns of it on its strand, which may run after this
    // coroutine resumes: wait for it, up to two seconds.
    for (int i = 0; i < 100 && h->held(); ++i) co_await sleep_for(20ms);
    BOOST_TEST(!h->held(), "a stall of " << stall.count() << " ms of a " << timeout.count() << " ms session");
    if (!h->held()) {  // told already: the wait returns at once (not held: nothing to wait for)
      auto [reason] = co_await h->loss().wait(with_ec);
      BOOST_TEST((reason == dlock::error::stalled), reason.message());
    }
  } else {
    BOOST_TEST(h->held(), "under loss_policy::session only the session's loss counts");
  }
  BOOST_TEST(client.session_id() == session, "the session outlived the stall");
  co_await h->release(with_ec);
  // Told lost or not, the release leaves no node of ours behind.
  auto nodes_under = std::is_same_v<Holder, zk::semaphore> ? path + "/leases" : path;
  auto [listed, children, parent] = co_await client.get_children(nodes_under, with_ec);
  BOOST_TEST(!listed, listed.message());
  BOOST_TEST(children.empty(), children.size() << " nodes left under " << nodes_under);
  co_await client.close();
}

asio::awaitable<void> zk_standard() { co_await zk_holder_suspends_on_a_stall<zk::mutex>(zk::loss_policy::standard); }
asio::awaitable<void> zk_session() { co_await zk_holder_suspends_on_a_stall<zk::mutex>(zk::loss_policy::session); }
asio::awaitable<void> zk_semaphore_standard() {
  co_await zk_holder_suspends_on_a_stall<zk::semaphore>(zk::loss_policy::standard);
}
asio::awaitable<void> zk_semaphore_session() {
  co_await zk_holder_suspends_on_a_stall<zk::semaphore>(zk::loss_policy::session);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(stall)

BOOST_AUTO_TEST_CASE(redis_holder_reports_its_loss_before_its_validity_ends) {
  redis_test::run(redis_holder_loses_to_a_stall());
}
BOOST_AUTO_TEST_CASE(zk_holder_under_standard_policy_reports_a_suspension) { redis_test::run(zk_standard()); }
BOOST_AUTO_TEST_CASE(zk_holder_under_session_policy_keeps_its_lock) { redis_test::run(zk_session()); }
BOOST_AUTO_TEST_CASE(zk_semaphore_under_standard_policy_reports_a_suspension) {
  redis_test::run(zk_semaphore_standard());
}
BOOST_AUTO_TEST_CASE(zk_semaphore_under_session_policy_keeps_its_lease) { redis_test::run(zk_semaphore_session()); }

BOOST_AUTO_TEST_SUITE_END()
