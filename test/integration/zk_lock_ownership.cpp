// ZooKeeper locks delete only what is theirs, and leave nothing behind:
// - a simple lock's release retried after a lost reply, or issued after the
//   session expired, never deletes the next holder's node (two holders);
// - an acquire that fails while its create's outcome is unknown does not
//   leave a node that blocks the lock for as long as the session lives;
// - a leader election's loss() is valid before campaign(), and its reads
//   outlive the client and the election object.
#include "common/servers.hpp"
#include "common/zk.hpp"
#include "common/zk_cutting_proxy.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/error.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/error.hpp>
#include <dlock/zk/leader_election.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/simple_lock.hpp>

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
namespace opcode = dlock::test::zk_opcode;

namespace {


std::string lock_path(const std::string& name) { return "/dlock-test/ownership/" + dlock::test::unique_name(name); }

asio::awaitable<void> ensure_parent(zk::client& zk) {
  co_await zk.create("/dlock-test", "", zk::create_mode::persistent, with_ec);
  co_await zk.create("/dlock-test/ownership", "", zk::create_mode::persistent, with_ec);
}

struct outcome {
  error_code ec;
  bool done = false;
};

template <class Lock>
asio::awaitable<void> acquire_into(Lock& lock, std::shared_ptr<outcome> out) {
  auto [ec] = co_await lock.acquire(with_ec);
  out->ec = ec;
  out->done = true;
}

asio::awaitable<void> wait_done(const std::shared_ptr<outcome>& out) {
  for (int i = 0; i < 6000 && !out->done; ++i) co_await sleep_for(10ms);
  BOOST_REQUIRE_MESSAGE(out->done, "the operation completed");
}

// The owner of the node at `path` (0 when there is none).
asio::awaitable<std::int64_t> owner_of(zk::client& zk, std::string path) {
  auto [ec, st] = co_await zk.exists(path, with_ec);
  BOOST_REQUIRE(!ec);
  co_return st ? st->ephemeral_owner : 0;
}

// (a) A's delete is applied but its reply lost; B acquires; A's background
// retry must check ownership and leave B's node alone.
asio::awaitable<void> retried_release_spares_the_next_holder() {
  auto ex = co_await asio::this_coro::executor;
  auto hosts = dlock::test::zk_hosts();
  dlock::test::zk_cutting_proxy proxy(hosts);
  zk::client a_zk(ex, zk_options(proxy.address(), 10s));
  zk::client b_zk(ex, zk_options(hosts, 10s));
  zk::client c_zk(ex, zk_options(hosts, 10s));
  co_await a_zk.connect();
  co_await b_zk.connect();
  co_await c_zk.connect();
  co_await ensure_parent(b_zk);
  auto path = lock_path("simple-retry");
  zk::simple_lock a(a_zk, path), b(b_zk, path), c(c_zk, path);

  co_await a.acquire();
  auto b_out = std::make_shared<outcome>();
  asio::co_spawn(ex, acquire_into(b, b_out), asio::detached);
  co_await sleep_for(200ms);
  BOOST_REQUIRE(!b_out->done);

  proxy.cut_after(opcode::remove, 50ms);
  auto [release_ec] = co_await a.release(with_ec);
  BOOST_TEST(!release_ec, release_ec.message());
  co_await wait_done(b_out);
  BOOST_REQUIRE(!b_out->ec);
  BOOST_TEST(b.held());
  // A reconnects on the same session and its removal retries.
  BOOST_REQUIRE(co_await dlock::test::wait_for_state(a_zk, zk::session_state::reconnected) ==
                zk::session_state::reconnected);
  co_await sleep_for(1s);

  BOOST_TEST(co_await owner_of(c_zk, path) == b_zk.session_id(), "B's node survives A's retried delete");
  auto [c_ec] = co_await c.try_acquire(with_ec);
  BOOST_TEST(c_ec == make_error_code(dlock::error::taken), c_ec.message());
  co_await b.release();
  co_await a_zk.close();
  co_await b_zk.close();
  co_await c_zk.close();
}

// (b) A's session expires, B acquires, A's client reopens a session and A
// releases (as with_lock does after a loss): nothing of B's is deleted.
asio::awaitable<void> release_after_expiry_spares_the_next_holder() {
  auto ex = co_await asio::this_coro::executor;
  auto hosts = dlock::test::zk_hosts();
  zk::client a_zk(ex, zk_options(hosts, 4s));
  zk::client b_zk(ex, zk_options(hosts, 4s));
  zk::client c_zk(ex, zk_options(hosts, 4s));
  co_await a_zk.connect();
  co_await b_zk.connect();
  co_await c_zk.connect();
  co_await ensure_parent(b_zk);
  auto path = lock_path("simple-expiry");
  zk::lock_options session_policy;
  session_policy.policy = zk::loss_policy::session;  // the loss is the expiry, not the suspension before it
  zk::simple_lock a(a_zk, path, session_policy), b(b_zk, path), c(c_zk, path);
  co_await a.acquire();
  auto b_out = std::make_shared<outcome>();
  asio::co_spawn(ex, acquire_into(b, b_out), asio::detached);

  BOOST_REQUIRE(co_await dlock::test::expire_session(a_zk, zk_options(hosts, 4s)));
  auto [loss_ec] = co_await a.loss().wait(with_ec);
  BOOST_TEST(loss_ec == make_error_code(zk::error::session_expired), loss_ec.message());
  co_await wait_done(b_out);
  BOOST_REQUIRE(!b_out->ec);
  BOOST_REQUIRE(co_await dlock::test::wait_for_state(a_zk, zk::session_state::connected) ==
                zk::session_state::connected);

  auto [release_ec] = co_await a.release(with_ec);
  BOOST_TEST(release_ec == make_error_code(zk::error::session_expired), "the release reports the loss");
  BOOST_TEST(co_await owner_of(c_zk, path) == b_zk.session_id(), "B's node survives A's release");
  auto [c_ec] = co_await c.try_acquire(with_ec);
  BOOST_TEST(c_ec == make_error_code(dlock::error::taken), c_ec.message());
  BOOST_TEST(b.held());
  co_await b.release();
  co_await a_zk.close();
  co_await b_zk.close();
  co_await c_zk.close();
}

// Children of `path` that a session other than the test's observer owns.
asio::awaitable<std::size_t> children_of(zk::client& zk, std::string path) {
  auto [ec, children, st] = co_await zk.get_children(path, with_ec);
  if (ec == zk::error::no_node) co_return 0;
  BOOST_REQUIRE(!ec);
  co_return children.size();
}

asio::awaitable<bool> node_is_gone(zk::client& zk, std::string path, bool sequential) {
  for (int i = 0; i < 200; ++i) {  // well past the proxy's refusal, short of the session timeout
    if (sequential ? co_await children_of(zk, path) == 0 : co_await owner_of(zk, path) == 0) co_return true;
    co_await sleep_for(100ms);
  }
  co_return false;
}

// The create is applied, its reply lost, then every reconnection is refused
// for longer than the acquire's retries but shorter than the session: the
// acquire fails, and our node must not outlive that failure.
template <class Lock>
asio::awaitable<void> failed_acquire_with_unknown_create_leaves_nothing(bool sequential) {
  auto ex = co_await asio::this_coro::executor;
  auto hosts = dlock::test::zk_hosts();
  dlock::test::zk_cutting_proxy proxy(hosts);
  zk::client a_zk(ex, zk_options(proxy.address(), 20s));
  zk::client b_zk(ex, zk_options(hosts, 10s));
  co_await a_zk.connect();
  co_await b_zk.connect();
  co_await ensure_parent(b_zk);
  auto path = lock_path(sequential ? "unknown-create-mutex" : "unknown-create-simple");
  if (sequential) co_await b_zk.create(path, "", zk::create_mode::persistent);
  Lock a(a_zk, path), b(b_zk, path);
  auto session = a_zk.session_id();

  proxy.cut_after(opcode::create2, 50ms);
  proxy.refuse_for(8s);
  auto [ec] = co_await a.acquire(with_ec);
  BOOST_TEST(ec == make_error_code(zk::error::connection_loss), ec.message());
  BOOST_TEST(!a.held());
  BOOST_TEST(proxy.cuts() == 1);

  BOOST_TEST(co_await node_is_gone(b_zk, path, sequential), "our node was found and deleted");
  BOOST_TEST(a_zk.session_id() == session, "the session lived through it");
  auto [b_ec] = co_await b.acquire_for(20s, with_ec);
  BOOST_TEST(!b_ec, b_ec.message());
  co_await b.release(with_ec);
  auto [again_ec] = co_await a.acquire_for(20s, with_ec);
  BOOST_TEST(!again_ec, "the same object acquires again: " << again_ec.message());
  co_await a.release(with_ec);
  co_await a_zk.close();
  co_await b_zk.close();
}

asio::awaitable<void> election_loss_before_campaign() {
  auto ex = co_await asio::this_coro::executor;
  zk::client zk(ex, zk_options(dlock::test::zk_hosts()));
  co_await zk.connect();
  zk::leader_election election(zk, lock_path("election"));
  BOOST_TEST(!election.loss().armed());
  auto [ec] = co_await election.loss().wait(with_ec);
  BOOST_TEST(ec == make_error_code(dlock::error::not_held), ec.message());
  co_await election.campaign("one");
  BOOST_TEST(election.is_leader());
  auto [again] = co_await election.campaign("two", with_ec);
  BOOST_TEST(again == make_error_code(dlock::error::already_held), again.message());
  co_await election.resign();
  co_await election.campaign("three");  // the same object campaigns again
  BOOST_TEST(election.is_leader());
  co_await election.resign();
  co_await zk.close();
}

asio::awaitable<void> observe_into(zk::leader_election& election, std::shared_ptr<outcome> out) {
  auto [ec, leader] = co_await election.observe(std::nullopt, with_ec);
  out->ec = ec;
  out->done = true;
}

// observe() waits for hours in practice: the election object and the client
// may be gone before it completes.
asio::awaitable<void> observe_outlives_client_and_election() {
  auto ex = co_await asio::this_coro::executor;
  auto zk = std::make_unique<zk::client>(ex, zk_options(dlock::test::zk_hosts()));
  co_await zk->connect();
  auto election = std::make_unique<zk::leader_election>(*zk, lock_path("observed"));
  auto out = std::make_shared<outcome>();
  asio::co_spawn(ex, observe_into(*election, out), asio::detached);
  co_await sleep_for(200ms);
  BOOST_REQUIRE(!out->done);
  election.reset();
  zk.reset();
  co_await wait_done(out);
  BOOST_TEST(out->ec == make_error_code(dlock::error::closed), out->ec.message());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_lock_ownership)

BOOST_AUTO_TEST_CASE(simple_lock_retried_release_never_deletes_the_next_holders_node) {
  asio::io_context io;
  run_coroutine(io, retried_release_spares_the_next_holder());
}

BOOST_AUTO_TEST_CASE(simple_lock_release_after_expiry_never_deletes_the_next_holders_node) {
  asio::io_context io;
  run_coroutine(io, release_after_expiry_spares_the_next_holder());
}

BOOST_AUTO_TEST_CASE(mutex_acquire_failed_with_unknown_create_leaves_no_node) {
  asio::io_context io;
  run_coroutine(io, failed_acquire_with_unknown_create_leaves_nothing<zk::mutex>(true));
}

BOOST_AUTO_TEST_CASE(simple_lock_acquire_failed_with_unknown_create_leaves_no_node) {
  asio::io_context io;
  run_coroutine(io, failed_acquire_with_unknown_create_leaves_nothing<zk::simple_lock>(false));
}

BOOST_AUTO_TEST_CASE(election_loss_is_valid_before_campaign) {
  asio::io_context io;
  run_coroutine(io, election_loss_before_campaign());
}

BOOST_AUTO_TEST_CASE(election_observe_outlives_the_client_and_the_election) {
  asio::io_context io;
  run_coroutine(io, observe_outlives_client_and_election());
}

BOOST_AUTO_TEST_SUITE_END()
