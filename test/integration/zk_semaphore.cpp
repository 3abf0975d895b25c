// dlock::zk::semaphore against a real ZooKeeper server (DLOCK_ZK_HOSTS):
// leases, refusals, timeouts and cancellation that leave no node, the loss
// signal, and N+3 contenders that never hold more than N leases.
#include "common/servers.hpp"
#include "common/zk.hpp"
#include "common/zk_cutting_proxy.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/error.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/error.hpp>
#include <dlock/zk/semaphore.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
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

zk::options options() { return dlock::test::zk_options(dlock::test::zk_hosts()); }

std::string sem_path(const std::string& name) { return "/dlock-test/semaphores/" + dlock::test::unique_name(name); }

asio::awaitable<std::size_t> leases_on_server(zk::client& zk, std::string path) {
  auto [ec, children, st] = co_await zk.get_children(path + "/leases", with_ec);
  if (ec == zk::error::no_node) co_return 0;
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  co_return children.size();
}

// Polls until `path` has `expected` leases (background deletes take a moment).
asio::awaitable<bool> settles_at(zk::client& zk, std::string path, std::size_t expected) {
  for (int i = 0; i < 300; ++i) {
    if (co_await leases_on_server(zk, path) == expected) co_return true;
    co_await sleep_for(10ms);
  }
  co_return false;
}

struct outcome {
  error_code ec;
  bool done = false;
};

asio::awaitable<void> acquire_into(zk::semaphore& s, std::size_t n, asio::cancellation_slot slot,
                                   std::shared_ptr<outcome> out) {
  auto [ec] = co_await s.acquire(n, asio::bind_cancellation_slot(slot, asio::as_tuple(asio::use_awaitable)));
  out->ec = ec;
  out->done = true;
}

asio::awaitable<void> wait_done(std::shared_ptr<outcome> out) {
  for (int i = 0; i < 3000 && !out->done; ++i) co_await sleep_for(10ms);
  BOOST_REQUIRE_MESSAGE(out->done, "the acquire completed");
}

asio::awaitable<void> leases_add_up_and_go_back() {
  auto ex = co_await asio::this_coro::executor;
  zk::client zk(ex, options());
  co_await zk.connect();
  auto path = sem_path("basic");
  zk::semaphore s(zk, path, 3);
  BOOST_TEST(s.name() == path);
  BOOST_TEST(!s.held());
  auto [never] = co_await s.release(with_ec);
  BOOST_TEST(never == make_error_code(dlock::error::not_held));

  co_await s.acquire();
  BOOST_TEST(s.held());
  BOOST_TEST(s.leases() == 1u);
  co_await s.acquire(2);
  BOOST_TEST(s.leases() == 3u);
  BOOST_TEST(co_await leases_on_server(zk, path) == 3u);
  auto [over] = co_await s.acquire(1, with_ec);
  BOOST_TEST(over == make_error_code(dlock::error::already_held), "no lease can ever come: we hold them all");

  auto [too_many] = co_await s.release(4, with_ec);
  BOOST_TEST(too_many == make_error_code(dlock::error::invalid_argument));
  co_await s.release(2);
  BOOST_TEST(s.leases() == 1u);
  BOOST_TEST(co_await leases_on_server(zk, path) == 1u);
  co_await s.release();
  BOOST_TEST(!s.held());
  BOOST_TEST(co_await leases_on_server(zk, path) == 0u);
  auto [again] = co_await s.release(with_ec);
  BOOST_TEST(!again, "a second release succeeds");
  co_await dlock::test::delete_tree(zk, path);
  co_await zk.close();
}

asio::awaitable<void> bad_input_is_refused_at_once() {
  auto ex = co_await asio::this_coro::executor;
  zk::client zk(ex, options());
  co_await zk.connect();
  auto path = sem_path("refused");
  zk::semaphore bad_path(zk, "no-slash", 2);
  zk::semaphore root(zk, "/", 2);
  zk::semaphore zero(zk, path, 0);
  zk::semaphore s(zk, path, 2);
  BOOST_TEST((std::get<0>(co_await bad_path.acquire(with_ec)) == make_error_code(dlock::error::invalid_argument)));
  BOOST_TEST((std::get<0>(co_await root.acquire(with_ec)) == make_error_code(dlock::error::invalid_argument)));
  BOOST_TEST((std::get<0>(co_await zero.try_acquire(with_ec)) == make_error_code(dlock::error::invalid_argument)));
  BOOST_TEST((std::get<0>(co_await s.acquire(0, with_ec)) == make_error_code(dlock::error::invalid_argument)));
  BOOST_TEST((std::get<0>(co_await s.acquire(3, with_ec)) == make_error_code(dlock::error::invalid_argument)));
  BOOST_TEST((std::get<0>(co_await s.acquire_for(1, 0s, with_ec)) == make_error_code(dlock::error::invalid_argument)));
  auto [ec, st] = co_await zk.exists(path, with_ec);
  BOOST_TEST(!st.has_value(), "nothing was sent");
  co_await zk.close();
}

asio::awaitable<void> try_acquire_when_full_is_taken() {
  auto ex = co_await asio::this_coro::executor;
  zk::client zk(ex, options());
  co_await zk.connect();
  auto path = sem_path("full");
  zk::semaphore holder(zk, path, 2);
  zk::semaphore other(zk, path, 2);
  co_await holder.acquire(2);
  auto [ec] = co_await other.try_acquire(with_ec);
  BOOST_TEST(ec == make_error_code(dlock::error::taken));
  BOOST_TEST(co_await settles_at(zk, path, 2), "the refused acquire left no node");
  co_await holder.release(1);
  co_await other.try_acquire();
  BOOST_TEST(other.held());
  auto [ec2] = co_await other.try_acquire(with_ec);  // 1 + 1 held on the path, 1 + 1 <= 2 for this object
  BOOST_TEST(ec2 == make_error_code(dlock::error::taken));
  co_await other.release();
  co_await holder.release();
  co_await dlock::test::delete_tree(zk, path);
  co_await zk.close();
}

asio::awaitable<void> acquire_for_times_out_leaving_no_node() {
  auto ex = co_await asio::this_coro::executor;
  zk::client zk(ex, options());
  co_await zk.connect();
  auto path = sem_path("timeout");
  zk::semaphore holder(zk, path, 1);
  zk::semaphore waiter(zk, path, 1);
  co_await holder.acquire();
  auto started = std::chrono::steady_clock::now();
  auto [ec] = co_await waiter.acquire_for(300ms, with_ec);
  BOOST_TEST(ec == make_error_code(dlock::error::timed_out));
  BOOST_TEST((std::chrono::steady_clock::now() - started >= 300ms));
  BOOST_TEST(!waiter.held());
  BOOST_TEST(co_await leases_on_server(zk, path) == 1u, "only the holder's lease");
  co_await holder.release();
  co_await waiter.acquire_for(5s);  // the mutex was released too
  BOOST_TEST(waiter.held());
  co_await waiter.release();
  co_await dlock::test::delete_tree(zk, path);
  co_await zk.close();
}

asio::awaitable<void> cancellation_and_destruction_leave_nothing() {
  auto ex = co_await asio::this_coro::executor;
  zk::client zk(ex, options());
  co_await zk.connect();
  auto path = sem_path("cancel");
  zk::semaphore holder(zk, path, 2);
  co_await holder.acquire(2);

  zk::semaphore waiter(zk, path, 2);
  asio::cancellation_signal stop;
  auto out = std::make_shared<outcome>();
  asio::co_spawn(ex, acquire_into(waiter, 2, stop.slot(), out), asio::detached);
  co_await sleep_for(300ms);
  BOOST_TEST(!out->done);
  stop.emit(asio::cancellation_type::terminal);
  co_await wait_done(out);
  BOOST_TEST(out->ec == make_error_code(asio::error::operation_aborted));
  BOOST_TEST(co_await leases_on_server(zk, path) == 2u, "the cancelled acquire's leases are gone");

  // Destroyed while acquiring: aborted, nothing left.
  auto doomed = std::make_unique<zk::semaphore>(zk, path, 2);
  auto out2 = std::make_shared<outcome>();
  asio::co_spawn(ex, acquire_into(*doomed, 1, {}, out2), asio::detached);
  co_await sleep_for(300ms);
  doomed.reset();
  co_await wait_done(out2);
  BOOST_TEST(out2->ec == make_error_code(asio::error::operation_aborted));
  BOOST_TEST(co_await settles_at(zk, path, 2));

  // Destroyed while holding: its leases are deleted in the background.
  {
    zk::semaphore gone(zk, path, 3);
    co_await gone.acquire();
    BOOST_TEST(co_await leases_on_server(zk, path) == 3u);
  }
  BOOST_TEST(co_await settles_at(zk, path, 2));
  co_await holder.release();
  co_await dlock::test::delete_tree(zk, path);
  co_await zk.close();
}

asio::awaitable<void> session_expiry_fires_the_loss() {
  auto ex = co_await asio::this_coro::executor;
  auto opts = dlock::test::zk_options(dlock::test::zk_hosts(), 4s);
  zk::client zk(ex, opts);
  co_await zk.connect();
  zk::client observer(ex, options());
  co_await observer.connect();
  auto path = sem_path("expiry");
  zk::semaphore s(zk, path, 2);
  co_await s.acquire(2);
  BOOST_REQUIRE(co_await dlock::test::expire_session(zk, opts));
  auto [reason] = co_await s.loss().wait(with_ec);
  BOOST_TEST((reason == make_error_code(zk::error::session_expired) || reason == make_error_code(zk::error::connection_loss)), reason.message());
  BOOST_TEST(!s.held());
  BOOST_TEST(co_await settles_at(observer, path, 0), "the expiry took the leases");
  auto [released] = co_await s.release(with_ec);
  BOOST_TEST(released == reason, "release after a loss reports it");
  // The reopened session can acquire again.
  co_await zk.connect();
  co_await s.acquire();
  BOOST_TEST(s.leases() == 1u);
  co_await s.release();
  co_await dlock::test::delete_tree(observer, path);
  co_await observer.close();
  co_await zk.close();
}

asio::awaitable<void> a_deleted_lease_node_fires_the_loss() {
  auto ex = co_await asio::this_coro::executor;
  zk::client zk(ex, options());
  co_await zk.connect();
  zk::client intruder(ex, options());
  co_await intruder.connect();
  auto path = sem_path("deleted");
  zk::semaphore s(zk, path, 3);
  co_await s.acquire(2);
  auto [ec, children, st] = co_await intruder.get_children(path + "/leases", with_ec);
  BOOST_REQUIRE(children.size() == 2u);
  co_await intruder.remove(path + "/leases/" + children[0]);
  auto [reason] = co_await s.loss().wait(with_ec);
  BOOST_TEST(reason == make_error_code(dlock::error::lost));
  BOOST_TEST(!s.held());
  co_await s.release(with_ec);
  BOOST_TEST(co_await settles_at(zk, path, 0), "release deleted the other lease");
  co_await dlock::test::delete_tree(zk, path);
  co_await intruder.close();
  co_await zk.close();
}

// --- lost create replies ---

// Pre-creates the semaphore's nodes, so that the mutex's node is the first
// create2 through the proxy and our first lease the second.
asio::awaitable<void> prepare(zk::client& zk, std::string path) {
  for (auto p : {std::string("/dlock-test"), std::string("/dlock-test/semaphores"), path, path + "/locks",
                 path + "/leases"})
    co_await zk.create(p, "", zk::create_mode::persistent, with_ec);
}

asio::awaitable<std::size_t> owned_by(zk::client& zk, std::string path, std::int64_t session) {
  auto [ec, children, st] = co_await zk.get_children(path + "/leases", with_ec);
  std::size_t n = 0;
  for (const auto& child : children) {
    auto [e, node] = co_await zk.exists(path + "/leases/" + child, with_ec);
    if (!e && node && node->ephemeral_owner == session) ++n;
  }
  co_return n;
}

// Our creates are applied, their replies lost: the reconnected acquire finds
// them by GUID and adopts them, making no more.
asio::awaitable<void> lost_create_replies_are_adopted() {
  auto ex = co_await asio::this_coro::executor;
  auto hosts = dlock::test::zk_hosts();
  dlock::test::zk_cutting_proxy proxy(hosts);
  zk::client a_zk(ex, dlock::test::zk_options(proxy.address(), 20s));
  zk::client b_zk(ex, options());
  co_await a_zk.connect();
  co_await b_zk.connect();
  auto path = sem_path("lost-reply");
  co_await prepare(b_zk, path);
  zk::semaphore a(a_zk, path, 3);
  proxy.cut_after(dlock::test::zk_opcode::create2, 50ms, 2);
  auto [ec] = co_await a.acquire(2, with_ec);
  BOOST_TEST(!ec, ec.message());
  BOOST_TEST(proxy.cuts() == 1);
  BOOST_TEST(a.leases() == 2u);
  BOOST_TEST(co_await owned_by(b_zk, path, a_zk.session_id()) == 2u, "no duplicate lease node");
  co_await a.release();
  BOOST_TEST(co_await settles_at(b_zk, path, 0));
  co_await dlock::test::delete_tree(b_zk, path);
  co_await a_zk.close();
  co_await b_zk.close();
}

// A create applied, its reply lost, then every reconnection refused for
// longer than the retries: the acquire fails, and the node is found by its
// GUID and deleted in the background once the connection is back.
asio::awaitable<void> failed_acquire_with_unknown_create_leaves_nothing() {
  auto ex = co_await asio::this_coro::executor;
  auto hosts = dlock::test::zk_hosts();
  dlock::test::zk_cutting_proxy proxy(hosts);
  zk::client a_zk(ex, dlock::test::zk_options(proxy.address(), 20s));
  zk::client b_zk(ex, options());
  co_await a_zk.connect();
  co_await b_zk.connect();
  auto path = sem_path("unknown-create");
  co_await prepare(b_zk, path);
  zk::semaphore a(a_zk, path, 2);
  auto session = a_zk.session_id();
  proxy.cut_after(dlock::test::zk_opcode::create2, 50ms, 2);
  proxy.refuse_for(8s);
  auto [ec] = co_await a.acquire(with_ec);
  BOOST_TEST(ec == make_error_code(zk::error::connection_loss), ec.message());
  BOOST_TEST(!a.held());
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = co_await leases_on_server(b_zk, path) == 0;
    if (!gone) co_await sleep_for(100ms);
  }
  BOOST_TEST(gone, "our lease node was found and deleted");
  BOOST_TEST(a_zk.session_id() == session, "the session lived through it");
  auto [again] = co_await a.acquire_for(2, 20s, with_ec);
  BOOST_TEST(!again, "the same object acquires again: " << again.message());
  co_await a.release(with_ec);
  co_await dlock::test::delete_tree(b_zk, path);
  co_await a_zk.close();
  co_await b_zk.close();
}

// --- contention ---

struct census {
  std::size_t max = 0;
  std::size_t holding = 0;  // leases held now, counted in-process
  std::size_t peak = 0;
  int overfull_listings = 0;
  int overfull_leases = 0;
  int rounds = 0;
};

// One contender: `rounds` times, take `n` leases, check both counts, give them back.
asio::awaitable<void> contend(zk::client& zk, std::string path, std::size_t max, std::size_t n, int rounds,
                              std::shared_ptr<census> c) {
  zk::semaphore s(zk, path, max);
  auto inside = path + "-inside";
  for (int i = 0; i < rounds; ++i) {
    co_await s.acquire(n);
    c->holding += n;
    c->peak = std::max(c->peak, c->holding);
    // On the server: every holder keeps one marker per lease under `inside`.
    std::vector<std::string> markers;
    for (std::size_t k = 0; k < n; ++k)
      markers.push_back((co_await zk.create(inside + "/m-", "", zk::create_mode::ephemeral_sequential)).path);
    auto [ec, children, st] = co_await zk.get_children(inside, with_ec);
    if (!ec && children.size() > max) ++c->overfull_listings;
    // The leases node holds the granted leases plus, at most, the nodes of
    // the one acquirer waiting under the mutex (2 here): never more.
    auto [lec, leases, lst] = co_await zk.get_children(path + "/leases", with_ec);
    if (!lec && leases.size() > max + 2) ++c->overfull_leases;
    co_await sleep_for(std::chrono::milliseconds(2 + i % 5));
    for (auto& m : markers) co_await zk.remove(m);
    c->holding -= n;
    co_await s.release();
    ++c->rounds;
  }
}

asio::awaitable<void> contention_never_exceeds_the_maximum() {
  auto ex = co_await asio::this_coro::executor;
  constexpr std::size_t max = 3;
  auto path = sem_path("contention");
  std::vector<std::unique_ptr<zk::client>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<zk::client>(ex, options()));
    co_await clients.back()->connect();
  }
  co_await clients[0]->create("/dlock-test", "", zk::create_mode::persistent, with_ec);
  co_await clients[0]->create("/dlock-test/semaphores", "", zk::create_mode::persistent, with_ec);
  co_await clients[0]->create(path + "-inside", "", zk::create_mode::persistent);
  auto c = std::make_shared<census>();
  c->max = max;
  constexpr int contenders = max + 3;
  std::vector<std::shared_ptr<outcome>> outs;
  for (int i = 0; i < contenders; ++i) {
    auto out = std::make_shared<outcome>();
    outs.push_back(out);
    std::size_t n = i % 3 == 2 ? 2 : 1;  // some take two leases at once
    asio::co_spawn(ex, contend(*clients[i % 3], path, max, n, 15, c), [out](std::exception_ptr e) {
      out->done = true;
      if (e) out->ec = make_error_code(dlock::error::lost);
    });
  }
  for (auto& out : outs) {
    for (int i = 0; i < 12000 && !out->done; ++i) co_await sleep_for(10ms);
    BOOST_REQUIRE(out->done);
    BOOST_TEST(!out->ec);
  }
  BOOST_TEST(c->rounds == contenders * 15);
  BOOST_TEST(c->peak <= max);
  BOOST_TEST(c->peak >= 2u, "they really contended");
  BOOST_TEST(c->overfull_listings == 0);
  BOOST_TEST(c->overfull_leases == 0);
  BOOST_TEST(co_await leases_on_server(*clients[0], path) == 0u);
  auto [lec, locks, lst] = co_await clients[0]->get_children(path + "/locks", with_ec);
  BOOST_TEST(locks.empty(), "every mutex node is gone");
  co_await dlock::test::delete_tree(*clients[0], path);
  co_await dlock::test::delete_tree(*clients[0], path + "-inside");
  for (auto& cl : clients) co_await cl->close();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_semaphore)

BOOST_AUTO_TEST_CASE(leases_add_up_and_are_released) {
  asio::io_context io;
  run_coroutine(io, leases_add_up_and_go_back());
}

BOOST_AUTO_TEST_CASE(bad_input_sends_nothing) {
  asio::io_context io;
  run_coroutine(io, bad_input_is_refused_at_once());
}

BOOST_AUTO_TEST_CASE(try_acquire_when_full) {
  asio::io_context io;
  run_coroutine(io, try_acquire_when_full_is_taken());
}

BOOST_AUTO_TEST_CASE(acquire_for_times_out) {
  asio::io_context io;
  run_coroutine(io, acquire_for_times_out_leaving_no_node());
}

BOOST_AUTO_TEST_CASE(cancel_and_destroy) {
  asio::io_context io;
  run_coroutine(io, cancellation_and_destruction_leave_nothing());
}

BOOST_AUTO_TEST_CASE(session_expiry) {
  asio::io_context io;
  run_coroutine(io, session_expiry_fires_the_loss());
}

BOOST_AUTO_TEST_CASE(deleted_lease) {
  asio::io_context io;
  run_coroutine(io, a_deleted_lease_node_fires_the_loss());
}

BOOST_AUTO_TEST_CASE(lost_create_replies) {
  asio::io_context io;
  run_coroutine(io, lost_create_replies_are_adopted());
}

BOOST_AUTO_TEST_CASE(unknown_create_after_retries) {
  asio::io_context io;
  run_coroutine(io, failed_acquire_with_unknown_create_leaves_nothing());
}

BOOST_AUTO_TEST_CASE(contention) {
  asio::io_context io;
  run_coroutine(io, contention_never_exceeds_the_maximum());
}

BOOST_AUTO_TEST_SUITE_END()
