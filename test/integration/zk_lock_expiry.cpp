// lock_options::restart_after_expiry: a waiting acquire whose session expires
// (forced the way Curator's tests force it) queues again on the session the
// client reopens and gets the lock once the holder leaves; without the
// option the expiry ends the wait. The same for a leader election's campaign.
#include "common/servers.hpp"
#include "common/zk.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/error.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/error.hpp>
#include <dlock/zk/leader_election.hpp>
#include <dlock/zk/mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <memory>

using namespace dlock;
using namespace std::chrono_literals;
using dlock::test::run_coroutine;
using dlock::test::sleep_for;
using dlock::test::with_ec;
using dlock::test::zk_options;

namespace {

constexpr auto short_session = 4s;

std::string lock_path(const std::string& name) { return "/dlock-test/expiry/" + dlock::test::unique_name(name); }

zk::lock_options restarting() {
  zk::lock_options o;
  o.restart_after_expiry = true;
  return o;
}

struct outcome {
  error_code ec;
  bool done = false;
};

asio::awaitable<void> acquire_for_into(zk::mutex& lock, std::chrono::seconds limit, std::shared_ptr<outcome> out) {
  auto [ec] = co_await lock.acquire_for(limit, with_ec);
  out->ec = ec;
  out->done = true;
}

asio::awaitable<void> campaign_into(zk::leader_election& election, std::string id, std::shared_ptr<outcome> out) {
  auto [ec] = co_await election.campaign(id, with_ec);
  out->ec = ec;
  out->done = true;
}

asio::awaitable<void> wait_done(const std::shared_ptr<outcome>& out) {
  for (int i = 0; i < 6000 && !out->done; ++i) co_await sleep_for(10ms);
  BOOST_REQUIRE_MESSAGE(out->done, "the operation completed");
}

// How many children of `path` the session `owner` holds.
asio::awaitable<int> nodes_owned_by(zk::client& observer, std::string path, std::int64_t owner) {
  auto [ec, children, st] = co_await observer.get_children(path, with_ec);
  if (ec) co_return 0;
  int owned = 0;
  for (const auto& child : children) {
    auto [exists_ec, node] = co_await observer.exists(path + "/" + child, with_ec);
    if (!exists_ec && node && node->ephemeral_owner == owner) ++owned;
  }
  co_return owned;
}

// Waits until `waiter`'s current session has a node queued under `path`;
// fails at once if the waiting operation ends instead.
asio::awaitable<void> wait_until_queued(zk::client& observer, std::string path, zk::client& waiter,
                                        std::shared_ptr<outcome> out) {
  for (int i = 0; i < 6000; ++i) {
    BOOST_REQUIRE_MESSAGE(!out->done, "the wait ended: " << out->ec.message());
    auto session = waiter.session_id();
    if (session != 0 && co_await nodes_owned_by(observer, path, session) == 1) co_return;
    co_await sleep_for(10ms);
  }
  BOOST_FAIL("the waiter never queued under " << path);
}

// Forces the expiry of `victim`'s session and waits for the fresh one.
asio::awaitable<void> expire(zk::client& victim) {
  auto before = victim.session_id();
  BOOST_REQUIRE(co_await dlock::test::expire_session(victim, zk_options(dlock::test::zk_hosts(), short_session)));
  BOOST_REQUIRE(co_await dlock::test::wait_for_state(victim, zk::session_state::connected) ==
                zk::session_state::connected);
  BOOST_REQUIRE(victim.session_id() != before);
}

asio::awaitable<void> waiting_acquire_restarts_on_the_new_session() {
  auto ex = co_await asio::this_coro::executor;
  auto hosts = dlock::test::zk_hosts();
  zk::client holder_zk(ex, zk_options(hosts)), waiter_zk(ex, zk_options(hosts, short_session)),
      observer(ex, zk_options(hosts));
  co_await holder_zk.connect();
  co_await waiter_zk.connect();
  co_await observer.connect();
  auto path = lock_path("restart");
  zk::mutex holder(holder_zk, path);
  zk::mutex waiter(waiter_zk, path, restarting());
  co_await holder.acquire();
  auto out = std::make_shared<outcome>();
  asio::co_spawn(ex, acquire_for_into(waiter, 60s, out), asio::detached);
  co_await wait_until_queued(observer, path, waiter_zk, out);

  co_await expire(waiter_zk);
  co_await wait_until_queued(observer, path, waiter_zk, out);  // again, on the new session
  BOOST_TEST(!waiter.held());

  co_await holder.release();
  co_await wait_done(out);
  BOOST_TEST(!out->ec, out->ec.message());
  BOOST_TEST(waiter.held());
  BOOST_TEST(co_await nodes_owned_by(observer, path, waiter_zk.session_id()) == 1);
  co_await waiter.release();
  BOOST_TEST(co_await nodes_owned_by(observer, path, waiter_zk.session_id()) == 0);
  co_await holder_zk.close();
  co_await waiter_zk.close();
  co_await observer.close();
}

asio::awaitable<void> without_the_option_the_expiry_ends_the_wait() {
  auto ex = co_await asio::this_coro::executor;
  auto hosts = dlock::test::zk_hosts();
  zk::client holder_zk(ex, zk_options(hosts)), waiter_zk(ex, zk_options(hosts, short_session)),
      observer(ex, zk_options(hosts));
  co_await holder_zk.connect();
  co_await waiter_zk.connect();
  co_await observer.connect();
  auto path = lock_path("no-restart");
  zk::mutex holder(holder_zk, path);
  zk::mutex waiter(waiter_zk, path);
  co_await holder.acquire();
  auto out = std::make_shared<outcome>();
  asio::co_spawn(ex, acquire_for_into(waiter, 60s, out), asio::detached);
  co_await wait_until_queued(observer, path, waiter_zk, out);
  BOOST_REQUIRE(co_await dlock::test::expire_session(waiter_zk, zk_options(hosts, short_session)));
  co_await wait_done(out);
  BOOST_TEST(out->ec == make_error_code(zk::error::session_expired), out->ec.message());
  BOOST_TEST(!waiter.held());
  co_await holder.release();
  co_await holder_zk.close();
  co_await waiter_zk.close();
  co_await observer.close();
}

asio::awaitable<void> the_restarted_wait_keeps_its_limit() {
  auto ex = co_await asio::this_coro::executor;
  auto hosts = dlock::test::zk_hosts();
  zk::client holder_zk(ex, zk_options(hosts)), waiter_zk(ex, zk_options(hosts, short_session)),
      observer(ex, zk_options(hosts));
  co_await holder_zk.connect();
  co_await waiter_zk.connect();
  co_await observer.connect();
  auto path = lock_path("restart-limit");
  zk::mutex holder(holder_zk, path);
  zk::mutex waiter(waiter_zk, path, restarting());
  co_await holder.acquire();
  auto out = std::make_shared<outcome>();
  asio::co_spawn(ex, acquire_for_into(waiter, 20s, out), asio::detached);  // the holder never leaves
  co_await wait_until_queued(observer, path, waiter_zk, out);
  co_await expire(waiter_zk);
  co_await wait_until_queued(observer, path, waiter_zk, out);
  co_await wait_done(out);
  BOOST_TEST(out->ec == make_error_code(dlock::error::timed_out), out->ec.message());
  BOOST_TEST(co_await nodes_owned_by(observer, path, waiter_zk.session_id()) == 0);  // nothing left behind
  co_await holder.release();
  co_await holder_zk.close();
  co_await waiter_zk.close();
  co_await observer.close();
}

asio::awaitable<void> campaign_restarts_on_the_new_session() {
  auto ex = co_await asio::this_coro::executor;
  auto hosts = dlock::test::zk_hosts();
  zk::client leader_zk(ex, zk_options(hosts)), candidate_zk(ex, zk_options(hosts, short_session)),
      observer(ex, zk_options(hosts));
  co_await leader_zk.connect();
  co_await candidate_zk.connect();
  co_await observer.connect();
  auto path = lock_path("election");
  zk::leader_election leader(leader_zk, path);
  zk::election_options restart;
  restart.restart_after_expiry = true;
  zk::leader_election candidate(candidate_zk, path, restart);
  co_await leader.campaign("first");
  auto out = std::make_shared<outcome>();
  asio::co_spawn(ex, campaign_into(candidate, "second", out), asio::detached);
  co_await wait_until_queued(observer, path, candidate_zk, out);
  co_await expire(candidate_zk);
  co_await wait_until_queued(observer, path, candidate_zk, out);
  co_await leader.resign();
  co_await wait_done(out);
  BOOST_TEST(!out->ec, out->ec.message());
  {
    zk::leader_election view(observer, path);
    auto [ec, current] = co_await view.leader(with_ec);
    BOOST_TEST(!ec);
    BOOST_TEST(current.value_or("") == "second");
  }
  co_await candidate.resign();
  co_await leader_zk.close();
  co_await candidate_zk.close();
  co_await observer.close();
}

// A write conditional on holding the lock (mutex::ownership_check) is
// applied while the lock is held and refused once its session expired,
// although the holder has not released.
asio::awaitable<void> conditional_write_fails_once_the_lock_is_lost() {
  auto ex = co_await asio::this_coro::executor;
  auto hosts = dlock::test::zk_hosts();
  zk::client holder_zk(ex, zk_options(hosts, short_session)), observer(ex, zk_options(hosts));
  co_await holder_zk.connect();
  co_await observer.connect();
  auto path = lock_path("conditional");
  auto data = path + "-data";
  co_await observer.create(data, "0", zk::create_mode::persistent, with_ec);
  zk::mutex holder(holder_zk, path);
  // Named vectors: g++ 12 cannot keep an initializer list in a coroutine frame.
  std::vector<zk::op> never{holder.ownership_check(), zk::op::set(data, "never")};
  auto [ec_never, r_never] = co_await holder_zk.multi(never, with_ec);
  BOOST_CHECK_MESSAGE(ec_never == zk::error::no_node, ec_never.message());
  co_await holder.acquire();
  auto check = holder.ownership_check();
  std::vector<zk::op> while_held{check, zk::op::set(data, "held")};
  auto [ec_held, r_held] = co_await holder_zk.multi(while_held, with_ec);
  BOOST_CHECK_MESSAGE(!ec_held, ec_held.message());
  co_await expire(holder_zk);
  // The check built while held, sent after the loss: refused by the server.
  std::vector<zk::op> after_loss{check, zk::op::set(data, "after loss")};
  auto [ec_lost, r_lost] = co_await holder_zk.multi(after_loss, with_ec);
  BOOST_CHECK_MESSAGE(ec_lost == zk::error::no_node, ec_lost.message());
  BOOST_CHECK(r_lost.failed_op == std::optional<std::size_t>(0));
  std::vector<zk::op> checked_now{holder.ownership_check(), zk::op::set(data, "after loss")};
  auto [ec_now, r_now] = co_await holder_zk.multi(checked_now, with_ec);
  BOOST_CHECK_MESSAGE(ec_now == zk::error::no_node, ec_now.message());
  auto [ec_get, value, st] = co_await observer.get(data, with_ec);
  BOOST_CHECK_EQUAL(value, "held");
  co_await holder.release(with_ec);
  co_await observer.remove(data, -1, with_ec);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_lock_expiry)

BOOST_AUTO_TEST_CASE(waiting_acquire_restarts) {
  asio::io_context io;
  run_coroutine(io, waiting_acquire_restarts_on_the_new_session());
}

BOOST_AUTO_TEST_CASE(off_by_default) {
  asio::io_context io;
  run_coroutine(io, without_the_option_the_expiry_ends_the_wait());
}

BOOST_AUTO_TEST_CASE(restart_within_the_wait_limit) {
  asio::io_context io;
  run_coroutine(io, the_restarted_wait_keeps_its_limit());
}

BOOST_AUTO_TEST_CASE(a_write_conditional_on_the_lock_fails_once_it_is_lost) {
  asio::io_context io;
  run_coroutine(io, conditional_write_fails_once_the_lock_is_lost());
}

BOOST_AUTO_TEST_CASE(campaign_restarts) {
  asio::io_context io;
  run_coroutine(io, campaign_restarts_on_the_new_session());
}

BOOST_AUTO_TEST_SUITE_END()
