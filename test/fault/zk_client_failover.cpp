// dlock::zk::client when servers die (DLOCK_ZK_ENSEMBLE): failover to another
// member, every member down past the session timeout, forced expiry.
#include "common/zk.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/zk/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <set>
#include <thread>
#include <vector>

using namespace dlock;
using dlock::test::run_coroutine;
using dlock::test::wait_for_any_state;
using dlock::test::wait_for_event;
using dlock::test::wait_for_state;
using zk::create_mode;
using zk::session_state;
constexpr auto tuple = asio::as_tuple(asio::deferred);

namespace {

/// Restarts what a test killed, even when a check failed.
struct restart_guard {
  std::vector<std::string> names;
  ~restart_guard() {
    for (auto& name : names) {
      try {
        dlock::test::server_action("restart", name);
      } catch (...) {
      }
    }
  }
};

/// An ensemble member only answers once a quorum is up: restart them together.
void restart_together(std::vector<std::string>& names) {
  const char* script = std::getenv("DLOCK_SERVERS_SCRIPT");
  BOOST_REQUIRE(script);
  std::vector<int> status(names.size(), -1);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < names.size(); ++i)
    threads.emplace_back([&, i] { status[i] = std::system((std::string(script) + " restart " + names[i]).c_str()); });
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < names.size(); ++i) BOOST_TEST(status[i] == 0, "restart " << names[i]);
  names.clear();
}

/// Restarts every member it names together, even when a check failed.
struct restart_all_guard {
  std::vector<std::string> names;
  ~restart_all_guard() {
    try {
      if (!names.empty()) restart_together(names);
    } catch (...) {
    }
  }
};

std::string member_of(const std::string& server) {
  auto port = static_cast<std::uint16_t>(std::stoi(server.substr(server.rfind(':') + 1)));
  return dlock::test::zk_member_name(port);
}

/// Creates the ephemeral `path` with `c`, again after a connection loss: when
/// the killed member was the leader, the survivors drop their clients while
/// they elect a new one. A retry that finds the node means the lost try made it.
asio::awaitable<void> create_through_an_election(zk::client& c, std::string path) {
  for (int attempt = 0; attempt < 10; ++attempt) {
    co_await c.connect();  // at once when connected, else once reconnected
    auto [ec, made] = co_await c.create(path, "", create_mode::ephemeral, tuple);
    if (!ec || ec == zk::error::node_exists) co_return;
    BOOST_TEST_MESSAGE("create " << path << ": " << ec.message() << ", again");
    BOOST_REQUIRE_MESSAGE(ec == zk::error::connection_loss, ec.message());
  }
  BOOST_FAIL("no create of " << path << " in 10 tries");
}

/// Removes `path` once its ephemeral children are gone. Another client's
/// close ends its session (and its ephemerals) at once when a server answers
/// within the close's limit, else the servers expire it a session timeout
/// later: just after a leader election, either can happen.
asio::awaitable<void> remove_once_empty(zk::client& c, std::string path) {
  asio::steady_timer pause(co_await asio::this_coro::executor);
  auto give_up = std::chrono::steady_clock::now() + dlock::test::patience;
  for (;;) {
    auto [ec] = co_await c.remove(path, -1, tuple);
    if (ec != zk::error::not_empty) {
      BOOST_TEST(!ec, "remove " << path << ": " << ec.message());
      co_return;
    }
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < give_up, path << " kept its children");
    pause.expires_after(std::chrono::milliseconds(200));
    co_await pause.async_wait(asio::deferred);
  }
}

asio::awaitable<void> kill_connected_member(zk::client& c, zk::client& other, std::string base) {
  co_await c.connect();
  co_await other.connect();
  auto id = c.session_id();
  co_await c.create(base, "", create_mode::persistent);
  zk::watch pending;
  auto [e0, absent] = co_await c.exists(base + "/flag", pending, tuple);
  BOOST_REQUIRE(!e0);

  auto member = member_of(c.current_server());
  BOOST_TEST_MESSAGE("killing " << member << " (" << c.current_server() << ")");
  restart_guard guard{{member}};
  dlock::test::server_action("kill", member);

  BOOST_TEST((co_await wait_for_state(c, session_state::suspended) == session_state::suspended));
  BOOST_TEST((co_await wait_for_state(c, session_state::reconnected) == session_state::reconnected));
  BOOST_TEST(c.session_id() == id);  // the session survived
  BOOST_TEST(member_of(c.current_server()) != member);
  BOOST_TEST(c.stats().reconnections == 1u);

  // The watch armed before the failure still fires.
  co_await create_through_an_election(other, base + "/flag");
  auto [e1, event] = co_await wait_for_event(pending, base + "/flag");
  BOOST_TEST(!e1, e1.message());
  BOOST_TEST((event.type == zk::watch_event_type::created));
  co_await other.close();
  co_await remove_once_empty(c, base);
  co_await c.close();
}

asio::awaitable<void> all_members_down(zk::client& c) {
  co_await c.connect();
  auto id = c.session_id();
  auto timeout = c.negotiated_session_timeout();
  BOOST_TEST_MESSAGE("negotiated session timeout " << timeout.count() << " ms");
  zk::watch pending;
  auto never = "/" + dlock::test::unique_name("zkc-down");
  co_await c.exists(never, pending);

  restart_all_guard guard{{"zk1", "zk2", "zk3"}};
  for (auto& name : guard.names) dlock::test::server_action("kill", name);
  BOOST_TEST((co_await wait_for_state(c, session_state::suspended) == session_state::suspended));
  auto suspended_at = std::chrono::steady_clock::now();
  BOOST_TEST((co_await wait_for_state(c, session_state::lost) == session_state::lost));
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - suspended_at);
  BOOST_TEST_MESSAGE("lost " << waited.count() << " ms after suspended (session timeout " << timeout.count() << " ms)");

  restart_together(guard.names);
  // A session again: the old one if the servers kept it, else a fresh one; the state says which.
  std::vector<session_state> with_session;  // not a braced argument: g++ 12 rejects one inside a coroutine
  with_session.push_back(session_state::connected);
  with_session.push_back(session_state::reconnected);
  auto again = co_await wait_for_any_state(c, std::move(with_session));
  BOOST_REQUIRE((again == session_state::connected || again == session_state::reconnected));
  if (c.state() == session_state::reconnected) {
    BOOST_TEST_MESSAGE("the servers kept the old session");
    BOOST_TEST(c.session_id() == id);
  } else {
    BOOST_TEST_MESSAGE("a fresh session");
    BOOST_TEST(c.session_id() != id);
    BOOST_TEST(c.stats().sessions_opened == 2u);
    auto [ew, ev] = co_await wait_for_event(pending, never);
    BOOST_TEST((ew == zk::error::session_expired), ew.message());
  }
  auto [e, st] = co_await c.exists("/", tuple);  // and it works
  BOOST_TEST(!e, e.message());
  co_await c.close();
}

struct state_change {
  session_state state;
  std::chrono::steady_clock::time_point at;
};

/// Every state change `c` reports, in order, until it is closed.
asio::awaitable<void> record_states(zk::client& c, std::shared_ptr<std::vector<state_change>> seen) {
  for (;;) {
    auto [ec, s] = co_await c.wait_state_change(tuple);
    if (ec) co_return;
    seen->push_back({s, std::chrono::steady_clock::now()});
    if (s == session_state::closed) co_return;
  }
}

asio::awaitable<void> forced_expiry(zk::client& c, std::string hosts, std::string base) {
  co_await c.connect();
  auto id = c.session_id();
  co_await c.create(base, "", create_mode::ephemeral);
  zk::watch pending;  // on a node nobody creates: only the session's end can finish it
  co_await c.exists(base + "-never", pending);

  // The states are recorded from here on: the client may go lost and be
  // connected to a fresh session while the expiry is still being forced.
  auto seen = std::make_shared<std::vector<state_change>>();
  asio::co_spawn(co_await asio::this_coro::executor, record_states(c, seen), asio::detached);

  // Twin handles on the same session, closed: the servers end the session.
  // One twin is not enough: the victim steals the session back at once, and
  // a twin that lost it sends no CLOSE (see expire_session).
  auto forced_at = std::chrono::steady_clock::now();
  BOOST_REQUIRE(co_await dlock::test::expire_session(c, dlock::test::zk_options(hosts, std::chrono::seconds(4))));

  auto [ew, ev] = co_await wait_for_event(pending, base + "-never");
  BOOST_TEST((ew == zk::error::session_expired), ew.message() << " " << zk::to_string(ev.type));

  // reopen_on_expiry (the default): a fresh session follows, and says so.
  BOOST_TEST((co_await wait_for_state(c, session_state::connected) == session_state::connected));
  auto state_is = [](session_state s) { return [s](const state_change& change) { return change.state == s; }; };
  auto lost = std::find_if(seen->begin(), seen->end(), state_is(session_state::lost));
  BOOST_TEST((lost != seen->end()), "the expiry was never reported as lost");
  if (lost != seen->end()) {
    BOOST_TEST((std::find_if(lost, seen->end(), state_is(session_state::connected)) != seen->end()));
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(lost->at - forced_at);
    BOOST_TEST_MESSAGE("lost " << waited.count() << " ms after the first twin (session timeout "
                               << c.negotiated_session_timeout().count() << " ms)");
  }
  BOOST_TEST(c.session_id() != id);
  BOOST_TEST(c.stats().sessions_opened == 2u);
  auto [e, st] = co_await c.exists(base, tuple);
  BOOST_TEST(!e);
  BOOST_TEST(!st.has_value());  // the old session's ephemeral is gone
  co_await c.close();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_client_failover)

BOOST_AUTO_TEST_CASE(killing_the_connected_member_suspends_then_reconnects_the_same_session) {
  asio::io_context io;
  auto options = dlock::test::zk_options(dlock::test::zk_ensemble(), std::chrono::seconds(6));
  zk::client c(io.get_executor(), options);
  zk::client other(io.get_executor(), options);
  run_coroutine(io, kill_connected_member(c, other, "/" + dlock::test::unique_name("zkc-failover")));
}

BOOST_AUTO_TEST_CASE(every_member_down_past_the_session_timeout_is_lost_then_a_session_again) {
  asio::io_context io;
  zk::client c(io.get_executor(), dlock::test::zk_options(dlock::test::zk_ensemble(), std::chrono::seconds(2)));
  run_coroutine(io, all_members_down(c));
}

BOOST_AUTO_TEST_CASE(forced_expiry_is_reported_as_lost) {
  asio::io_context io;
  auto hosts = dlock::test::zk_ensemble();
  zk::client c(io.get_executor(), dlock::test::zk_options(hosts, std::chrono::seconds(4)));
  run_coroutine(io, forced_expiry(c, hosts, "/" + dlock::test::unique_name("zkc-expiry")));
}

BOOST_AUTO_TEST_SUITE_END()
