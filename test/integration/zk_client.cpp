// dlock::zk::client against a real ZooKeeper (DLOCK_ZK_HOSTS): every
// operation's success and error paths, watches, cancellation, pipelining,
// completion tokens and threads.
#include "common/zk.hpp"
#include "common/zk_cutting_proxy.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/error.hpp>
#include <dlock/zk/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace dlock;
using dlock::test::run_coroutine;
using zk::create_mode;
using zk::session_state;
constexpr auto tuple = asio::as_tuple(asio::deferred);

namespace {

std::string base_path(const std::string& what) { return "/" + dlock::test::unique_name("zkc-" + what); }

asio::awaitable<void> every_operation(zk::client& c, std::string base) {
  co_await c.connect();
  BOOST_TEST((c.state() == session_state::connected));
  BOOST_TEST(c.session_id() != 0);
  BOOST_TEST(!c.current_server().empty());
  BOOST_TEST(c.negotiated_session_timeout().count() > 0);

  auto [e1, made] = co_await c.create(base, "hello", create_mode::persistent, tuple);
  BOOST_TEST(!e1, e1.message());
  BOOST_TEST(made.path == base);
  BOOST_TEST(made.stat.version == 0);
  BOOST_TEST(made.stat.data_length == 5);

  auto [e2, again] = co_await c.create(base, "", create_mode::persistent, tuple);
  BOOST_TEST((e2 == zk::error::node_exists), e2.message());

  auto [e3, data, st] = co_await c.get(base, tuple);
  BOOST_TEST(!e3);
  BOOST_TEST(data == "hello");
  BOOST_TEST(st.czxid == made.stat.czxid);

  auto [e4, st2] = co_await c.set(base, "world", 0, tuple);
  BOOST_TEST(!e4);
  BOOST_TEST(st2.version == 1);
  auto [e5, st3] = co_await c.set(base, "stale", 0, tuple);
  BOOST_TEST((e5 == zk::error::bad_version), e5.message());

  auto [e6, present] = co_await c.exists(base, tuple);
  BOOST_TEST(!e6);
  BOOST_REQUIRE(present.has_value());
  BOOST_TEST(present->version == 1);
  auto [e7, absent] = co_await c.exists(base + "/missing", tuple);
  BOOST_TEST(!e7);  // a missing node is not an error
  BOOST_TEST(!absent.has_value());

  auto [e8, eph] = co_await c.create(base + "/e-", "", create_mode::ephemeral_sequential, tuple);
  BOOST_TEST(!e8);
  BOOST_TEST(eph.path.size() == base.size() + 3 + 10);  // 10-digit sequence suffix
  BOOST_TEST(eph.stat.ephemeral_owner == c.session_id());
  auto [e9, seq] = co_await c.create(base + "/p-", "", create_mode::persistent_sequential, tuple);
  BOOST_TEST(!e9);
  BOOST_TEST(seq.stat.ephemeral_owner == 0);
  auto [e10, box] = co_await c.create(base + "/box", "", create_mode::container, tuple);
  BOOST_TEST(!e10, e10.message());
  auto [e10b, child_of_ephemeral] = co_await c.create(eph.path + "/x", "", create_mode::persistent, tuple);
  BOOST_TEST((e10b == zk::error::no_children_for_ephemerals));

  auto [e11, children, parent] = co_await c.get_children(base, tuple);
  BOOST_TEST(!e11);
  std::sort(children.begin(), children.end());
  BOOST_TEST(children.size() == 3u);
  BOOST_TEST(parent.num_children == 3);
  BOOST_TEST(std::count(children.begin(), children.end(), "box") == 1);

  auto [e12] = co_await c.remove(base, -1, tuple);
  BOOST_TEST((e12 == zk::error::not_empty), e12.message());
  auto [e13] = co_await c.remove(seq.path, 5, tuple);
  BOOST_TEST((e13 == zk::error::bad_version));
  for (auto& name : children) {
    auto [e] = co_await c.remove(base + "/" + name, -1, tuple);
    BOOST_TEST(!e, name << ": " << e.message());
  }
  auto [e14] = co_await c.remove(base, 1, tuple);
  BOOST_TEST(!e14);
  auto [e15, gone, gone_stat] = co_await c.get(base, tuple);
  BOOST_TEST((e15 == zk::error::no_node), e15.message());
  auto [e16] = co_await c.remove(base, -1, tuple);
  BOOST_TEST((e16 == zk::error::no_node));
  auto [e17, no_children, no_stat] = co_await c.get_children(base, tuple);
  BOOST_TEST((e17 == zk::error::no_node));
  auto [e18, no_set] = co_await c.set(base, "x", -1, tuple);
  BOOST_TEST((e18 == zk::error::no_node));
  auto [e19] = co_await c.sync("/", tuple);
  BOOST_TEST(!e19, e19.message());

  co_await c.close();
  BOOST_TEST((c.state() == session_state::closed));
}

asio::awaitable<void> invalid_paths(zk::client& c) {
  co_await c.connect();
  auto sent = c.stats().requests_sent;
  for (std::string p : {std::string(), std::string("a"), std::string("/a/"), std::string("//"), std::string("/a//b"), std::string("/a\0b", 4)}) {
    auto [e1, made] = co_await c.create(p, "", create_mode::persistent, tuple);
    BOOST_TEST((e1 == dlock::error::invalid_argument));
    auto [e2, d, s] = co_await c.get(p, tuple);
    BOOST_TEST((e2 == dlock::error::invalid_argument));
    auto [e3] = co_await c.remove(p, -1, tuple);
    BOOST_TEST((e3 == dlock::error::invalid_argument));
    auto [e4, s4] = co_await c.set(p, "", -1, tuple);
    BOOST_TEST((e4 == dlock::error::invalid_argument));
    auto [e5, s5] = co_await c.exists(p, tuple);
    BOOST_TEST((e5 == dlock::error::invalid_argument));
    zk::watch w;
    auto [e6, names, s6] = co_await c.get_children(p, w, tuple);
    BOOST_TEST((e6 == dlock::error::invalid_argument));
    auto [e7, event] = co_await w.wait(tuple);
    BOOST_TEST((e7 == dlock::error::invalid_argument));
    auto [e8] = co_await c.sync(p, tuple);
    BOOST_TEST((e8 == dlock::error::invalid_argument));
  }
  BOOST_TEST(c.stats().requests_sent == sent);  // nothing was sent
  co_await c.close();
}

asio::awaitable<void> before_connect_and_after_close(zk::client& c) {
  auto [e1, d1, s1] = co_await c.get("/", tuple);
  BOOST_TEST((e1 == zk::error::invalid_state), e1.message());
  co_await c.connect();
  co_await c.close();
  auto [e2, d2, s2] = co_await c.get("/", tuple);
  BOOST_TEST((e2 == dlock::error::closed), e2.message());
  auto [e3] = co_await c.connect(tuple);
  BOOST_TEST((e3 == dlock::error::closed));
  auto [e4] = co_await c.close(tuple);  // closing twice is fine
  BOOST_TEST(!e4);
  auto [e5, s5] = co_await c.wait_state_change(tuple);
  BOOST_TEST((e5 == dlock::error::closed));
}


asio::awaitable<void> watches_fire(zk::client& c, std::string base) {
  co_await c.connect();
  co_await c.create(base, "", create_mode::persistent);
  auto delivered = c.stats().watch_events_delivered;

  // created: an exists watch on a missing node
  zk::watch created_w;
  auto [e1, absent] = co_await c.exists(base + "/n", created_w, tuple);
  BOOST_TEST(!e1);
  BOOST_TEST(!absent.has_value());
  co_await c.create(base + "/n", "1", create_mode::persistent);
  auto [e2, ev1] = co_await created_w.wait(tuple);
  BOOST_TEST(!e2, e2.message());
  BOOST_TEST((ev1.type == zk::watch_event_type::created));
  BOOST_TEST(ev1.path == base + "/n");

  // data change: a get watch
  zk::watch data_w;
  co_await c.get(base + "/n", data_w);
  co_await c.set(base + "/n", "2");
  auto [e3, ev2] = co_await data_w.wait(tuple);
  BOOST_TEST(!e3);
  BOOST_TEST((ev2.type == zk::watch_event_type::data_changed));

  // children change: a get_children watch
  zk::watch children_w;
  co_await c.get_children(base, children_w);
  co_await c.create(base + "/m", "", create_mode::ephemeral);
  auto [e4, ev3] = co_await children_w.wait(tuple);
  BOOST_TEST(!e4);
  BOOST_TEST((ev3.type == zk::watch_event_type::children_changed));
  BOOST_TEST(ev3.path == base);

  // deletion: an exists watch on a present node; the event may be awaited after it fired
  zk::watch deleted_w;
  co_await c.exists(base + "/n", deleted_w);
  co_await c.remove(base + "/n");
  co_await c.exists(base);  // a round trip: the event has arrived by now
  auto [e5, ev4] = co_await deleted_w.wait(tuple);
  BOOST_TEST(!e5);
  BOOST_TEST((ev4.type == zk::watch_event_type::deleted));
  BOOST_TEST(c.stats().watch_events_delivered == delivered + 4);

  // a failed registration leaves no watch behind: get on a missing node
  zk::watch failed_w;
  auto [e6, d6, s6] = co_await c.get(base + "/missing", failed_w, tuple);
  BOOST_TEST((e6 == zk::error::no_node));
  auto [e7, ev7] = co_await failed_w.wait(tuple);
  BOOST_TEST((e7 == zk::error::no_node));
  co_await c.create(base + "/missing", "", create_mode::ephemeral);
  co_await c.remove(base + "/missing");
  co_await c.exists(base);
  BOOST_TEST(c.stats().watch_events_delivered == delivered + 4);

  co_await c.remove(base + "/m");
  co_await c.remove(base);
  co_await c.close();
}

asio::awaitable<void> cancel_watches(zk::client& c, std::string base) {
  co_await c.connect();
  co_await c.create(base, "", create_mode::persistent);
  auto delivered = c.stats().watch_events_delivered;
  auto executor = co_await asio::this_coro::executor;

  // A cancelled wait (terminal, then partial) leaves the watch armed: it still fires.
  zk::watch w;
  co_await c.get(base, w);
  for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
    asio::cancellation_signal signal;
    std::optional<error_code> result;
    w.wait(asio::bind_cancellation_slot(signal.slot(), [&](error_code ec, zk::watch_event) { result = ec; }));
    signal.emit(type);
    co_await c.exists(base);  // let the cancellation run
    BOOST_REQUIRE(result.has_value());
    BOOST_TEST((*result == asio::error::operation_aborted));
  }
  co_await c.set(base, "changed");
  auto [e1, ev] = co_await w.wait(tuple);
  BOOST_TEST(!e1);
  BOOST_TEST((ev.type == zk::watch_event_type::data_changed));

  // A wait bound to a timer (through a parallel group) is cancelled when the timer wins.
  zk::watch idle;
  co_await c.get(base, idle);
  asio::steady_timer timer(executor, std::chrono::milliseconds(20));
  auto [order, e2, ev2, timer_ec] = co_await asio::experimental::make_parallel_group(
      idle.wait(asio::deferred), timer.async_wait(asio::deferred))
      .async_wait(asio::experimental::wait_for_one(), asio::deferred);
  BOOST_TEST(order[0] == 1u);  // the timer
  BOOST_TEST((e2 == asio::error::operation_aborted));

  // cancel(): the pending wait ends, and a later change delivers nothing.
  std::optional<error_code> cancelled;
  idle.wait([&](error_code ec, zk::watch_event) { cancelled = ec; });
  idle.cancel();
  BOOST_TEST(!idle.armed());
  co_await c.set(base, "again");
  co_await c.exists(base);
  BOOST_REQUIRE(cancelled.has_value());
  BOOST_TEST((*cancelled == asio::error::operation_aborted));
  BOOST_TEST(c.stats().watch_events_delivered == delivered + 1);

  // Waiting on it now fails, posted to the strand of the client that armed it:
  // on this thread, the io_context's (never on one of Asio's own), not inside the call.
  std::optional<error_code> unarmed;
  std::thread::id ran_on;
  idle.wait([&](error_code ec, zk::watch_event) {
    unarmed = ec;
    ran_on = std::this_thread::get_id();
  });
  BOOST_TEST(!unarmed.has_value());
  co_await c.exists(base);
  BOOST_REQUIRE(unarmed.has_value());
  BOOST_TEST((*unarmed == dlock::error::invalid_argument));
  BOOST_TEST((ran_on == std::this_thread::get_id()));

  // A watch no client ever armed: the awaiting coroutine's executor; a plain
  // callback has none, and no client gives one: it runs in place.
  zk::watch never;
  auto [e3, ev3] = co_await never.wait(tuple);
  BOOST_TEST((e3 == dlock::error::invalid_argument));
  std::optional<error_code> at_once;
  never.wait([&](error_code ec, zk::watch_event) { at_once = ec; });
  BOOST_REQUIRE(at_once.has_value());
  BOOST_TEST((*at_once == dlock::error::invalid_argument));

  // Destroying an armed watch removes it too.
  {
    zk::watch scoped;
    co_await c.get(base, scoped);
  }
  co_await c.set(base, "third");
  co_await c.exists(base);
  BOOST_TEST(c.stats().watch_events_delivered == delivered + 1);

  co_await c.remove(base);
  co_await c.close();
}

asio::awaitable<void> cancel_operations(zk::client& c, std::string base) {
  co_await c.connect();
  auto executor = co_await asio::this_coro::executor;
  // Terminal and partial cancellation of sent requests: the handler gets
  // operation_aborted at once, the late reply is dropped.
  for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
    asio::cancellation_signal signal;
    std::optional<error_code> result;
    c.get("/", asio::bind_cancellation_slot(signal.slot(), [&](error_code ec, std::string, zk::stat) { result = ec; }));
    signal.emit(type);
    co_await c.exists("/");  // its reply comes after the abandoned one's
    BOOST_REQUIRE(result.has_value());
    BOOST_TEST((*result == asio::error::operation_aborted));
  }
  // A cancelled create leaves no node behind, even though the server created it.
  {
    asio::cancellation_signal signal;
    std::optional<error_code> result;
    c.create(base, "", create_mode::persistent,
             asio::bind_cancellation_slot(signal.slot(), [&](error_code ec, zk::created) { result = ec; }));
    signal.emit(asio::cancellation_type::terminal);
    co_await c.exists("/");  // the create's reply has arrived: its node is being removed
    BOOST_REQUIRE(result.has_value());
    BOOST_TEST((*result == asio::error::operation_aborted));
    auto [e, st] = co_await c.exists(base, tuple);
    BOOST_TEST(!e);
    BOOST_TEST(!st.has_value());
  }
  // A cancelled arming request leaves no watch behind.
  {
    co_await c.create(base, "", create_mode::ephemeral);
    auto delivered = c.stats().watch_events_delivered;
    zk::watch w;
    asio::cancellation_signal signal;
    c.get(base, w, asio::bind_cancellation_slot(signal.slot(), [](error_code, std::string, zk::stat) {}));
    signal.emit(asio::cancellation_type::terminal);
    co_await c.exists("/");
    co_await c.set(base, "x");
    co_await c.exists("/");
    BOOST_TEST(c.stats().watch_events_delivered == delivered);
    co_await c.remove(base);
  }
  // A pending wait_state_change bound to a timer is cancelled when the timer wins.
  asio::steady_timer timer(executor, std::chrono::milliseconds(20));
  auto [order, e1, state, timer_ec] = co_await asio::experimental::make_parallel_group(
      c.wait_state_change(asio::deferred), timer.async_wait(asio::deferred))
      .async_wait(asio::experimental::wait_for_one(), asio::deferred);
  BOOST_TEST(order[0] == 1u);
  BOOST_TEST((e1 == asio::error::operation_aborted));
  co_await c.close();
}

asio::awaitable<void> pipelined(zk::client& c, std::string base, std::size_t count) {
  co_await c.connect();
  co_await c.create(base, "", create_mode::persistent);
  std::size_t completed = 0, failed = 0;
  std::set<std::string> paths;
  auto sent = c.stats().requests_sent;
  for (std::size_t i = 0; i < count; ++i) {
    c.create(base + "/n-", "", create_mode::ephemeral_sequential, [&](error_code ec, zk::created made) {
      ++completed;
      if (ec) ++failed;
      else paths.insert(made.path);
    });
  }
  auto [e, names, st] = co_await c.get_children(base, tuple);  // after all creates (FIFO)
  BOOST_TEST(!e);
  BOOST_TEST(completed == count);
  BOOST_TEST(failed == 0u);
  BOOST_TEST(paths.size() == count);
  BOOST_TEST(names.size() == count);
  BOOST_TEST(c.stats().requests_sent - sent == count + 1);
  co_await c.close();  // removes the ephemerals
  zk::client cleaner(co_await asio::this_coro::executor, dlock::test::zk_options(dlock::test::zk_hosts()));
  co_await cleaner.connect();
  auto [e2] = co_await cleaner.remove(base, -1, tuple);
  BOOST_TEST(!e2, e2.message());
  co_await cleaner.close();
}

// close() sends CLOSE only once a server answered its probe. When the probe's
// connection drops and the client reconnects within close's limit, the CLOSE
// must still go out: the session and its ephemerals end at once, not a session
// timeout later (a twin handle forcing an expiry relies on this too).
asio::awaitable<void> close_across_a_dropped_probe(std::string node) {
  auto executor = co_await asio::this_coro::executor;
  std::string server = dlock::test::zk_hosts();
  auto colon = server.rfind(':');
  dlock::test::zk_cutting_proxy proxy({asio::ip::make_address(server.substr(0, colon)),
                                       static_cast<std::uint16_t>(std::stoi(server.substr(colon + 1)))});
  zk::client c(executor, dlock::test::zk_options(proxy.address(), std::chrono::seconds(10)));
  zk::client observer(executor, dlock::test::zk_options(server));
  co_await c.connect();
  co_await observer.connect();
  co_await c.create(node, "", create_mode::ephemeral);

  proxy.cut_after(3 /* ZooKeeper's OpCode.exists: close's probe */, std::chrono::milliseconds(0));
  auto started = std::chrono::steady_clock::now();
  co_await c.close();
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  BOOST_TEST_MESSAGE("close took " << took.count() << " ms");
  BOOST_TEST(proxy.cuts() == 1);
  BOOST_TEST(c.stats().reconnections == 1u, "the client reconnected while closing");

  auto [e, st] = co_await observer.exists(node, tuple);
  BOOST_TEST(!e, e.message());
  BOOST_TEST(!st.has_value(), "the closed session's ephemeral outlived the close");
  co_await observer.close();
}

// Resuming a session that has ended, without reopen_on_expiry: nothing more
// will come, so connect() fails with session_expired at once instead of
// waiting out connect_timeout, and so does a later connect().
asio::awaitable<void> resume_an_ended_session() {
  auto executor = co_await asio::this_coro::executor;
  zk::client first(executor, dlock::test::zk_options(dlock::test::zk_hosts()));
  co_await first.connect();
  auto same = dlock::test::zk_options(dlock::test::zk_hosts());
  same.session_id = first.session_id();
  same.session_password = first.session_password();
  same.reopen_on_expiry = false;
  co_await first.close();  // answered by the server: the session is gone

  zk::client late(executor, same);
  auto started = std::chrono::steady_clock::now();
  auto [e1] = co_await late.connect(tuple);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  BOOST_TEST((e1 == zk::error::session_expired), e1.message());
  BOOST_TEST(took < same.connect_timeout / 2, "connect took " << took.count() << " ms");
  BOOST_TEST((late.state() == session_state::lost));
  auto [e2] = co_await late.connect(tuple);
  BOOST_TEST((e2 == zk::error::session_expired), e2.message());
  co_await late.close();
}

// After an expiry, until the next session is established, the client has no
// session: session_id() is 0, never the ended session's. Recipes compare it
// with the session their node belongs to before each delete; the ended id
// would let a request go out on the next session (another's node by then).
asio::awaitable<void> record_states(zk::client* c, std::shared_ptr<std::vector<std::pair<session_state, std::int64_t>>> seen) {
  for (;;) {
    auto [ec, state] = co_await c->wait_state_change(tuple);
    if (ec) co_return;
    seen->emplace_back(state, c->session_id());
    if (state == session_state::connected) co_return;  // the next session
  }
}

asio::awaitable<void> no_session_id_between_expiry_and_the_next_session() {
  auto executor = co_await asio::this_coro::executor;
  auto options = dlock::test::zk_options(dlock::test::zk_hosts());
  zk::client c(executor, options);
  co_await c.connect();
  const std::int64_t ended = c.session_id();
  auto seen = std::make_shared<std::vector<std::pair<session_state, std::int64_t>>>();
  asio::co_spawn(executor, record_states(&c, seen), asio::detached);
  BOOST_REQUIRE(co_await dlock::test::expire_session(c, options));
  for (int i = 0; i < 1000 && (seen->empty() || seen->back().first != session_state::connected); ++i) {
    asio::steady_timer pause(executor, std::chrono::milliseconds(10));
    co_await pause.async_wait(tuple);
  }
  BOOST_REQUIRE(!seen->empty());
  BOOST_TEST((seen->back().first == session_state::connected), "a new session was established");
  // Before the expiry, the twin that forces it may steal the session for a
  // moment: suspended and reconnected, the same session. From `lost` on, it
  // is over.
  bool saw_lost = false;
  for (auto [state, id] : *seen) {
    BOOST_TEST_MESSAGE(zk::to_string(state) << ": session 0x" << std::hex << id);
    saw_lost = saw_lost || state == session_state::lost;
    if (saw_lost) BOOST_TEST(id != ended, zk::to_string(state) << " with the ended session's id");
  }
  BOOST_TEST(saw_lost);
  BOOST_TEST(c.session_id() != 0);
  co_await c.close();
}

// The C client (3.8.0) sends a request at once when it is made. When that
// write fails (the connection was reset), it closes its socket but keeps the
// requests it had already written there, unanswered. On the next connection
// the server answers the resent request, whose reply does not match the
// oldest one waiting, and the C client fails every pending request with
// ZRUNTIMEINCONSISTENCY. That is a connection loss like any other, outcome
// unknown, and must read as one: recipes retry a connection loss, and a lock
// node's removal that gave up on this code left the node behind, blocking
// every later contender (two election candidates in integration.threads).
asio::awaitable<void> requests_on_a_socket_dropped_after_a_failed_write(std::string node) {
  auto executor = co_await asio::this_coro::executor;
  dlock::test::zk_cutting_proxy proxy(dlock::test::zk_hosts());
  zk::client c(executor, dlock::test::zk_options(proxy.address(), std::chrono::seconds(10)));
  co_await c.connect();
  struct outcome {
    bool done = false;
    error_code ec;
  };
  auto written = std::make_shared<outcome>();  // on the socket that will be reset, its reply held back
  auto failed = std::make_shared<outcome>();   // its write meets the reset
  proxy.hold_replies(dlock::test::zk_opcode::exists, std::chrono::seconds(2));
  c.exists(node, [written](error_code ec, std::optional<zk::stat>) { *written = {true, ec}; });
  for (int i = 0; i < 500 && proxy.forwarded(dlock::test::zk_opcode::exists) == 0; ++i)
    co_await dlock::test::sleep_for(std::chrono::milliseconds(10));
  BOOST_REQUIRE(proxy.forwarded(dlock::test::zk_opcode::exists) == 1);
  // On the client's strand, so that it reads nothing in between: the reset
  // reaches the socket, then the next request's write fails on it.
  asio::post(c.get_executor(), [&c, &proxy, node, failed] {
    proxy.reset_all();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    c.exists(node, [failed](error_code ec, std::optional<zk::stat>) { *failed = {true, ec}; });
  });
  for (int i = 0; i < 3000 && !(written->done && failed->done); ++i)
    co_await dlock::test::sleep_for(std::chrono::milliseconds(10));
  BOOST_REQUIRE(written->done && failed->done);
  for (auto& [name, o] : {std::pair{"written", written}, std::pair{"failed", failed}}) {
    BOOST_TEST((o->ec == zk::error::connection_loss), name << ": " << o->ec.message());
    BOOST_TEST((o->ec == dlock::condition::connection_lost), name << ": " << o->ec.message());
  }
  auto [ec, st] = co_await c.exists(node, tuple);
  BOOST_TEST(!ec, "the client is back: " << ec.message());
  co_await c.close();
}

// A cancelled create whose node the server made anyway is undone by a delete
// of the client's own. A delete lost with the connection may not have run:
// for a sequential node (a name nobody else gets) it goes again on the next
// connection, or the (persistent) node would stay for good.
asio::awaitable<void> an_orphans_removal_lost_with_the_connection_is_sent_again(std::string parent) {
  auto executor = co_await asio::this_coro::executor;
  dlock::test::zk_cutting_proxy proxy(dlock::test::zk_hosts());
  zk::client c(executor, dlock::test::zk_options(proxy.address(), std::chrono::seconds(10)));
  zk::client direct(executor, dlock::test::zk_options(dlock::test::zk_hosts()));
  co_await c.connect();
  co_await direct.connect();
  co_await direct.create(parent, "", create_mode::persistent);
  proxy.cut_before(dlock::test::zk_opcode::remove);  // the removal is dropped unsent, the connection cut
  asio::cancellation_signal signal;
  std::optional<error_code> result;
  c.create(parent + "/orphan-", "", create_mode::persistent_sequential,
           asio::bind_cancellation_slot(signal.slot(), [&](error_code ec, zk::created) { result = ec; }));
  signal.emit(asio::cancellation_type::terminal);
  std::vector<std::string> left{"not listed yet"};
  for (int i = 0; i < 1000 && !(proxy.cuts() == 1 && left.empty()); ++i) {
    co_await dlock::test::sleep_for(std::chrono::milliseconds(10));
    auto [ec, children, parent_stat] = co_await direct.get_children(parent, tuple);
    if (!ec) left = children;
  }
  BOOST_REQUIRE(result.has_value());
  BOOST_TEST((*result == asio::error::operation_aborted));
  BOOST_TEST(proxy.cuts() == 1, "the first removal was cut");
  BOOST_TEST(left.empty(), "the node was removed after the reconnection");
  for (const auto& child : left) co_await direct.remove(parent + "/" + child, -1, tuple);  // not left behind
  co_await direct.remove(parent, -1, tuple);
  co_await c.close();
  co_await direct.close();
}

// A check that throws out of a test coroutine, before its close, with the
// client owned by the test case: run_coroutine must report the failure, not
// keep running the io_context the open session keeps busy.
asio::awaitable<void> connect_then_throw(zk::client& c) {
  co_await c.connect();
  throw std::runtime_error("a failed check");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_client)

BOOST_AUTO_TEST_CASE(every_operation_success_and_error_paths) {
  asio::io_context io;
  zk::client c(io.get_executor(), dlock::test::zk_options(dlock::test::zk_hosts()));
  run_coroutine(io, every_operation(c, base_path("ops")));
}

BOOST_AUTO_TEST_CASE(invalid_paths_are_rejected_locally) {
  asio::io_context io;
  zk::client c(io.get_executor(), dlock::test::zk_options(dlock::test::zk_hosts()));
  run_coroutine(io, invalid_paths(c));
}

BOOST_AUTO_TEST_CASE(a_cancelled_creates_node_is_removed_across_a_connection_loss) {
  asio::io_context io;
  run_coroutine(io, an_orphans_removal_lost_with_the_connection_is_sent_again(base_path("orphan")));
}

BOOST_AUTO_TEST_CASE(requests_on_a_socket_the_c_client_dropped_fail_as_a_connection_loss) {
  asio::io_context io;
  run_coroutine(io, requests_on_a_socket_dropped_after_a_failed_write(base_path("dropped") + "/none"));
}

BOOST_AUTO_TEST_CASE(a_close_whose_probe_loses_its_connection_still_ends_the_session) {
  asio::io_context io;
  run_coroutine(io, close_across_a_dropped_probe(base_path("close-probe")));
}

BOOST_AUTO_TEST_CASE(resuming_an_ended_session_fails_at_once_without_reopen) {
  asio::io_context io;
  run_coroutine(io, resume_an_ended_session());
}

BOOST_AUTO_TEST_CASE(no_session_id_between_an_expiry_and_the_next_session) {
  asio::io_context io;
  run_coroutine(io, no_session_id_between_expiry_and_the_next_session());
}

BOOST_AUTO_TEST_CASE(a_coroutine_that_throws_before_closing_its_client_is_reported_not_hung) {
  asio::io_context io;
  zk::client c(io.get_executor(), dlock::test::zk_options(dlock::test::zk_hosts()));
  BOOST_CHECK_THROW(run_coroutine(io, connect_then_throw(c)), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(operations_before_connect_and_after_close) {
  asio::io_context io;
  zk::client c(io.get_executor(), dlock::test::zk_options(dlock::test::zk_hosts()));
  run_coroutine(io, before_connect_and_after_close(c));
}

BOOST_AUTO_TEST_CASE(watches_fire_on_create_delete_data_and_children) {
  asio::io_context io;
  zk::client c(io.get_executor(), dlock::test::zk_options(dlock::test::zk_hosts()));
  run_coroutine(io, watches_fire(c, base_path("watch")));
}

BOOST_AUTO_TEST_CASE(cancelling_watch_waits_and_watches) {
  asio::io_context io;
  zk::client c(io.get_executor(), dlock::test::zk_options(dlock::test::zk_hosts()));
  run_coroutine(io, cancel_watches(c, base_path("cancel-watch")));
}

BOOST_AUTO_TEST_CASE(cancelling_pending_operations) {
  asio::io_context io;
  zk::client c(io.get_executor(), dlock::test::zk_options(dlock::test::zk_hosts()));
  run_coroutine(io, cancel_operations(c, base_path("cancel-op")));
}

BOOST_AUTO_TEST_CASE(ten_thousand_pipelined_operations_complete) {
  asio::io_context io;
  zk::client c(io.get_executor(), dlock::test::zk_options(dlock::test::zk_hosts()));
  run_coroutine(io, pipelined(c, base_path("pipeline"), 10'000));
}

BOOST_AUTO_TEST_CASE(callback_future_and_deferred_tokens) {
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  zk::client c(io.get_executor(), dlock::test::zk_options(dlock::test::zk_hosts()));
  c.connect(asio::use_future).get();
  auto base = base_path("tokens");
  auto made = c.create(base, "v", create_mode::ephemeral, asio::use_future).get();
  BOOST_TEST(made.path == base);
  auto [data, st] = c.get(base, asio::use_future).get();
  BOOST_TEST(data == "v");
  BOOST_CHECK_THROW(c.get(base + "/none", asio::use_future).get(), boost::system::system_error);
  std::promise<error_code> removed;
  c.remove(base, -1, [&](error_code ec) { removed.set_value(ec); });  // a plain callback
  BOOST_TEST(!removed.get_future().get());
  auto op = c.exists(base, asio::deferred);  // deferred: nothing starts until invoked
  std::promise<bool> present;
  std::move(op)([&](error_code, std::optional<zk::stat> s) { present.set_value(s.has_value()); });
  BOOST_TEST(!present.get_future().get());
  c.close(asio::use_future).get();
  work.reset();
  runner.join();
}

asio::awaitable<void> busy_client(zk::client& c, std::string base, int rounds, std::atomic<int>& done) {
  co_await c.connect();
  for (int i = 0; i < rounds; ++i) {
    auto [e1, made] = co_await c.create(base + "-", "x", create_mode::ephemeral_sequential, tuple);
    BOOST_TEST(!e1);
    auto [e2, data, st] = co_await c.get(made.path, tuple);
    BOOST_TEST(!e2);
    auto [e3] = co_await c.remove(made.path, -1, tuple);
    BOOST_TEST(!e3);
  }
  co_await c.close();
  ++done;
}

BOOST_AUTO_TEST_CASE(io_context_on_two_threads_with_several_clients) {
  asio::io_context io(2);
  std::vector<std::unique_ptr<zk::client>> clients;
  std::atomic<int> done{0};
  for (int i = 0; i < 4; ++i) {
    clients.push_back(std::make_unique<zk::client>(io.get_executor(), dlock::test::zk_options(dlock::test::zk_hosts())));
    // Coroutines on the io_context itself (not the clients' strands): completions
    // hop between threads.
    asio::co_spawn(io, busy_client(*clients.back(), base_path("threads"), 200, done), asio::detached);
  }
  std::thread second([&] { io.run(); });
  io.run();
  second.join();
  BOOST_TEST(done.load() == 4);
}

BOOST_AUTO_TEST_SUITE_END()
