// asio::cancel_after and asio::cancel_at (Asio 1.31, Boost 1.86, on) with
// dlock's operations: every operation accepts them (they need the
// initiation's executor, dlock/detail/initiation.hpp), and the timeout
// cancels an acquire blocked on a held lock, which completes with
// operation_aborted and leaves nothing behind. Built only where Asio has
// cancel_after (test/CMakeLists.txt).
#include "common/run.hpp"
#include "common/servers.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/error.hpp>
#include <dlock/lock_loss.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/fenced.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/redis/semaphore.hpp>
#include <dlock/with_lock.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/leader_election.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/queue.hpp>
#include <dlock/zk/semaphore.hpp>
#include <dlock/zk/shared_mutex.hpp>
#include <dlock/zk/simple_lock.hpp>
#include <dlock/zk/watch.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancel_after.hpp>
#include <boost/asio/cancel_at.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace redis = dlock::redis;
namespace zk = dlock::zk;
using dlock::error_code;
using namespace std::chrono_literals;

namespace {

constexpr auto limit = 1s;

// Builds the operation with each token and drops it unstarted (`deferred`,
// cancel_after's default): this checks that the initiation compiles.
template <class Start>
void accepts_both(Start start) {
  [[maybe_unused]] auto after = start(asio::cancel_after(limit));
  [[maybe_unused]] auto at = start(asio::cancel_at(std::chrono::steady_clock::now() + limit));
}

asio::awaitable<void> locked_body() { co_return; }

}  // namespace

BOOST_AUTO_TEST_CASE(every_operation_takes_cancel_after_and_cancel_at) {
  asio::io_context io;
  auto ex = io.get_executor();
  zk::client c(ex, zk::options{});
  zk::watch w;
  zk::mutex m(c, "/m");
  zk::simple_lock sl(c, "/s");
  zk::shared_mutex rw(c, "/rw");
  zk::semaphore zs(c, "/sem", 2);
  zk::leader_election le(c, "/e");
  zk::queue q(c, "/q");
  accepts_both([&](auto t) { return c.connect(t); });
  accepts_both([&](auto t) { return c.close(t); });
  accepts_both([&](auto t) { return c.create("/a", "", zk::create_mode::persistent, t); });
  accepts_both([&](auto t) { return c.remove("/a", -1, t); });
  accepts_both([&](auto t) { return c.get("/a", t); });
  accepts_both([&](auto t) { return c.get("/a", w, t); });
  accepts_both([&](auto t) { return c.sync("/a", t); });
  accepts_both([&](auto t) { return c.set("/a", "", -1, t); });
  accepts_both([&](auto t) { return c.exists("/a", t); });
  accepts_both([&](auto t) { return c.exists("/a", w, t); });
  accepts_both([&](auto t) { return c.get_children("/a", t); });
  accepts_both([&](auto t) { return c.get_children("/a", w, t); });
  accepts_both([&](auto t) { return c.multi({}, t); });
  accepts_both([&](auto t) { return c.wait_state_change(t); });
  accepts_both([&](auto t) { return w.wait(t); });
  accepts_both([&](auto t) { return m.acquire(t); });
  accepts_both([&](auto t) { return m.try_acquire(t); });
  accepts_both([&](auto t) { return m.acquire_for(limit, t); });
  accepts_both([&](auto t) { return m.release(t); });
  accepts_both([&](auto t) { return m.participants(t); });
  accepts_both([&](auto t) { return m.loss().wait(t); });
  accepts_both([&](auto t) { return sl.acquire(t); });
  accepts_both([&](auto t) { return rw.reader().acquire(t); });
  accepts_both([&](auto t) { return rw.writer().acquire(t); });
  accepts_both([&](auto t) { return zs.acquire(t); });
  accepts_both([&](auto t) { return zs.acquire(2, t); });
  accepts_both([&](auto t) { return zs.try_acquire(t); });
  accepts_both([&](auto t) { return zs.acquire_for(limit, t); });
  accepts_both([&](auto t) { return zs.release(t); });
  accepts_both([&](auto t) { return zs.release(1, t); });
  accepts_both([&](auto t) { return le.campaign("me", t); });
  accepts_both([&](auto t) { return le.resign(t); });
  accepts_both([&](auto t) { return le.leader(t); });
  accepts_both([&](auto t) { return le.observe(std::nullopt, t); });
  accepts_both([&](auto t) { return q.offer("item", t); });
  accepts_both([&](auto t) { return q.poll(t); });
  accepts_both([&](auto t) { return q.remove(t); });
  accepts_both([&](auto t) { return q.take(t); });
  accepts_both([&](auto t) { return q.take_for(limit, t); });
  accepts_both([&](auto t) { return q.peek(t); });
  accepts_both([&](auto t) { return q.element(t); });
  accepts_both([&](auto t) { return q.size(t); });
  accepts_both([&](auto t) { return q.take_claimed(t); });
  accepts_both([&](auto t) { return q.ack(zk::claimed_item{}, t); });
  accepts_both([&](auto t) { return q.release(zk::claimed_item{}, t); });
  accepts_both([&](auto t) { return dlock::with_lock(m, locked_body, t); });

  redis::connection conn(ex, redis::options{});
  auto shared_conn = std::make_shared<redis::connection>(ex, redis::options{});
  redis::lock l(conn, "k");
  redis::semaphore rs(conn, "s", 2);
  redis::redlock rl(ex, {shared_conn}, "r");
  redis::script s("return 1");
  accepts_both([&](auto t) { return conn.connect(t); });
  accepts_both([&](auto t) { return conn.wait_for(redis::connection_state::connected, t); });
  accepts_both([&](auto t) { return conn.exec(redis::command("PING"), t); });
  accepts_both([&](auto t) { return conn.eval(s, redis::command("EVALSHA"), t); });
  accepts_both([&](auto t) { return redis::fenced_set(conn, "k", "v", 1, t); });
  accepts_both([&](auto t) { return l.acquire(t); });
  accepts_both([&](auto t) { return l.try_acquire(t); });
  accepts_both([&](auto t) { return l.acquire_for(limit, t); });
  accepts_both([&](auto t) { return l.release(t); });
  accepts_both([&](auto t) { return l.extend(1000ms, t); });
  accepts_both([&](auto t) { return rs.acquire(t); });
  accepts_both([&](auto t) { return rl.acquire(t); });
  accepts_both([&](auto t) { return rl.try_acquire(t); });
  accepts_both([&](auto t) { return rl.acquire_for(limit, t); });
  accepts_both([&](auto t) { return rl.release(t); });
  accepts_both([&](auto t) { return rl.settle(t); });
  accepts_both([&](auto t) { return rl.extend(1000ms, t); });
  BOOST_TEST(io.poll() == 0u);  // nothing started: every operation above was only built
}

namespace {

// `timed_out` completes as the README shows it: co_await throws.
template <class Op>
asio::awaitable<error_code> outcome_of(Op op) {
  try {
    co_await std::move(op);
  } catch (const boost::system::system_error& e) {
    co_return e.code();
  }
  co_return error_code{};
}

asio::awaitable<std::size_t> children_count(zk::client& c, std::string path) {
  auto [ec, children, st] = co_await c.get_children(path, asio::as_tuple(asio::deferred));
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  co_return children.size();
}

asio::awaitable<void> zk_acquire_times_out(asio::any_io_executor ex) {
  zk::client c(ex, dlock::test::zk_options(dlock::test::zk_hosts()));
  co_await c.connect();
  auto path = "/dlock-test/locks/" + dlock::test::unique_name("cancel-after");
  zk::mutex holder(c, path), other(c, path);
  co_await holder.acquire();

  auto started = std::chrono::steady_clock::now();
  auto ec = co_await outcome_of(other.acquire(asio::cancel_after(300ms)));
  BOOST_TEST((ec == asio::error::operation_aborted), ec.message());
  BOOST_TEST((std::chrono::steady_clock::now() - started >= 300ms));
  BOOST_TEST(!other.held());
  BOOST_TEST(co_await children_count(c, path) == 1u);  // only the holder's node

  ec = co_await outcome_of(other.acquire(asio::cancel_at(std::chrono::steady_clock::now() + 200ms)));
  BOOST_TEST((ec == asio::error::operation_aborted), ec.message());
  BOOST_TEST(co_await children_count(c, path) == 1u);

  // The cancelled object still works, and a timeout that does not run out changes nothing.
  co_await holder.release();
  co_await other.acquire(asio::cancel_after(10s));
  BOOST_TEST(other.held());
  co_await other.release();
  BOOST_TEST(co_await children_count(c, path) == 0u);
  co_await c.remove(path, -1);
  co_await c.close();
}

asio::awaitable<void> redis_acquire_times_out(asio::any_io_executor ex) {
  auto masters = dlock::test::redis_masters();
  BOOST_REQUIRE(!masters.empty());
  redis::options o;
  o.host = masters[0].host;
  o.port = masters[0].port;
  redis::connection conn(ex, o);
  co_await conn.connect();
  auto key = dlock::test::unique_name("cancel-after");
  redis::lock holder(conn, key), other(conn, key);
  co_await holder.acquire();

  auto ec = co_await outcome_of(other.acquire(asio::cancel_after(300ms)));
  BOOST_TEST((ec == asio::error::operation_aborted), ec.message());
  BOOST_TEST(!other.held());
  auto value = co_await conn.exec(redis::command("GET", key));
  BOOST_TEST(value.string() == holder.token());  // the holder's key, untouched

  co_await holder.release();
  value = co_await conn.exec(redis::command("GET", key));
  BOOST_TEST(value.is_nil());  // nothing of the cancelled acquire's left
  conn.close();
}

}  // namespace

BOOST_AUTO_TEST_CASE(zk_acquire_cancelled_by_cancel_after_leaves_no_node) { dlock::test::run(zk_acquire_times_out); }

BOOST_AUTO_TEST_CASE(redis_acquire_cancelled_by_cancel_after_leaves_the_key_alone) {
  dlock::test::run(redis_acquire_times_out);
}
