// A connection behind Sentinel, against the real Sentinel set of
// scripts/servers (one master, two replicas, three sentinels): discovery,
// each way it fails, and the connection following a failover (manual, and a
// killed master). Every case leaves the set settled for the next.
#include "redis_support.hpp"

#include <dlock/error.hpp>
#include <dlock/observer.hpp>
#include <dlock/redis/connection.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using dlock::error_code;
using namespace std::chrono_literals;

namespace {

constexpr auto with_ec = asio::as_tuple(asio::deferred);

redis::options sentinel_options(std::string name = dlock::test::sentinel_master_name()) {
  redis::options o;
  o.host = "invalid.example";  // not used with Sentinel
  for (const auto& s : dlock::test::sentinels()) o.sentinel.sentinels.push_back({s.host, s.port});
  o.sentinel.master_name = std::move(name);
  o.reconnect_min = 20ms;
  o.reconnect_max = 200ms;
  o.connect_timeout = 1000ms;
  return o;
}

redis::options plain_options(const dlock::test::endpoint& e) {
  redis::options o;
  o.host = e.host;
  o.port = e.port;
  o.reconnect = false;
  return o;
}

template <class... Args>
asio::awaitable<redis::reply> must(redis::connection& c, Args... args) {
  auto op = c.exec(redis::command(args...), with_ec);
  auto [ec, r] = co_await std::move(op);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message() + ": " + std::string(r.string()));
  co_return r;
}

// The port of the server `c` is connected to, as it says.
asio::awaitable<int> server_port(redis::connection& c) {
  auto r = co_await must(c, "CONFIG", "GET", "port");
  BOOST_REQUIRE(r.is_array() && r.elements().size() == 2);
  co_return std::stoi(std::string(r.elements()[1].string()));
}

// What the first sentinel names as the master now.
asio::awaitable<int> named_master_port(asio::any_io_executor ex) {
  redis::connection sentinel(ex, plain_options(dlock::test::sentinels()[0]));
  co_await sentinel.connect();
  auto r = co_await must(sentinel, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", dlock::test::sentinel_master_name());
  sentinel.close();
  BOOST_REQUIRE(r.is_array() && r.elements().size() == 2);
  co_return std::stoi(std::string(r.elements()[1].string()));
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::deferred);
}

// The connection's states as its observer saw them, with their reasons.
struct states final : dlock::observer {
  std::vector<std::pair<redis::connection_state, error_code>> seen;
  void on_redis_connection(const dlock::redis_connection_changed& e) noexcept override {
    seen.emplace_back(e.state, e.reason);
  }
  bool saw(error_code why) const {
    for (const auto& [state, reason] : seen)
      if (reason == why) return true;
    return false;
  }
};

asio::awaitable<void> settle() {
  dlock::test::server_action("settle", "");
  co_return;
}

// ---- discovery ----

asio::awaitable<void> finds_the_master(asio::any_io_executor ex) {
  auto o = sentinel_options();
  // A sentinel that does not answer comes first: the next one is asked.
  o.sentinel.sentinels.insert(o.sentinel.sentinels.begin(), redis::server_address{"127.0.0.1", 1});
  redis::connection c(ex, o);
  co_await c.connect();
  auto info = co_await must(c, "INFO", "replication");
  BOOST_CHECK(info.string().find("role:master") != std::string::npos);
  BOOST_CHECK_EQUAL(co_await server_port(c), co_await named_master_port(ex));
  c.close();
}

asio::awaitable<void> unknown_name(asio::any_io_executor ex) {
  auto o = sentinel_options("no-such-master");
  o.reconnect = false;
  redis::connection c(ex, o);
  auto [ec] = co_await c.connect(with_ec);
  BOOST_CHECK_MESSAGE(ec == redis::error::master_unknown, ec.message());
}

asio::awaitable<void> no_sentinel_answers(asio::any_io_executor ex) {
  auto o = sentinel_options();
  o.sentinel.sentinels = {{"127.0.0.1", 1}, {"127.0.0.1", 2}};
  o.reconnect = false;
  redis::connection c(ex, o);
  auto [ec] = co_await c.connect(with_ec);
  BOOST_CHECK_MESSAGE(ec == redis::error::sentinels_unreachable, ec.message());
}

// A name the first sentinel monitors, given a replica's address: the
// sentinel names it, the replica says it is none.
asio::awaitable<void> named_replica(asio::any_io_executor ex) {
  int master = co_await named_master_port(ex);
  dlock::test::endpoint replica;
  for (const auto& node : dlock::test::sentinel_nodes())
    if (node.port != master) replica = node;
  auto first = dlock::test::sentinels()[0];
  auto name = dlock::test::unique_name("dlock-replica");
  redis::connection sentinel(ex, plain_options(first));
  co_await sentinel.connect();
  co_await must(sentinel, "SENTINEL", "MONITOR", name, replica.host, std::to_string(replica.port), "2");
  auto o = sentinel_options(name);
  o.sentinel.sentinels = {{first.host, first.port}};
  o.reconnect = false;
  redis::connection c(ex, o);
  auto [ec] = co_await c.connect(with_ec);
  co_await must(sentinel, "SENTINEL", "REMOVE", name);
  sentinel.close();
  BOOST_CHECK_MESSAGE(ec == redis::error::not_master, ec.message());
}

asio::awaitable<void> bad_options(asio::any_io_executor ex) {
  auto o = sentinel_options();
  o.sentinel.sentinels.clear();
  redis::connection c(ex, o);
  auto [ec] = co_await c.connect(with_ec);
  BOOST_CHECK(ec == dlock::error::invalid_argument);
  o = sentinel_options();
  o.sentinel.sentinels[1].port = 0;
  redis::connection d(ex, o);
  auto [ec2] = co_await d.connect(with_ec);
  BOOST_CHECK(ec2 == dlock::error::invalid_argument);
}

// ---- following a failover ----

// Waits until `c` reaches a server other than `old_port` (at most `limit`).
asio::awaitable<int> moved_from(redis::connection& c, int old_port, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    auto op = c.exec(redis::command("CONFIG", "GET", "port"), with_ec);
    auto [ec, r] = co_await std::move(op);
    if (!ec && r.is_array() && r.elements().size() == 2) {
      int port = std::stoi(std::string(r.elements()[1].string()));
      if (port != old_port) co_return port;
    }
    co_await sleep_for(50ms);
  }
  BOOST_FAIL("the connection did not move to the new master");
  co_return 0;
}

asio::awaitable<void> manual_failover(asio::any_io_executor ex) {
  co_await settle();
  auto seen = std::make_shared<states>();
  auto o = sentinel_options();
  o.observer = seen;
  redis::connection c(ex, o);
  co_await c.connect();
  int old_port = co_await server_port(c);
  redis::connection sentinel(ex, plain_options(dlock::test::sentinels()[1]));
  co_await sentinel.connect();
  co_await must(sentinel, "SENTINEL", "FAILOVER", dlock::test::sentinel_master_name());
  sentinel.close();
  int new_port = co_await moved_from(c, old_port, 30s);
  BOOST_CHECK_EQUAL(new_port, co_await named_master_port(ex));
  BOOST_CHECK(seen->saw(dlock::error::failed_over));
  auto info = co_await must(c, "INFO", "replication");
  BOOST_CHECK(info.string().find("role:master") != std::string::npos);
  c.close();
  co_await settle();
}

asio::awaitable<void> killed_master(asio::any_io_executor ex) {
  co_await settle();
  redis::connection c(ex, sentinel_options());
  co_await c.connect();
  int old_port = co_await server_port(c);
  auto old_name = dlock::test::sentinel_node_name(static_cast<std::uint16_t>(old_port));
  dlock::test::server_action("kill", old_name);
  int new_port = co_await moved_from(c, old_port, 60s);
  BOOST_CHECK_EQUAL(new_port, co_await named_master_port(ex));
  c.close();
  dlock::test::server_action("restart", old_name);  // back as a replica
  co_await settle();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(discovery)
BOOST_AUTO_TEST_CASE(the_sentinels_name_the_master_and_a_dead_one_is_skipped) { redis_test::run(finds_the_master); }
BOOST_AUTO_TEST_CASE(an_unknown_name_fails_with_master_unknown) { redis_test::run(unknown_name); }
BOOST_AUTO_TEST_CASE(no_sentinel_answering_fails_with_sentinels_unreachable) { redis_test::run(no_sentinel_answers); }
BOOST_AUTO_TEST_CASE(a_sentinel_naming_a_replica_fails_with_not_master) { redis_test::run(named_replica); }
BOOST_AUTO_TEST_CASE(no_sentinels_or_a_bad_address_is_invalid) { redis_test::run(bad_options); }
BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(failover)
BOOST_AUTO_TEST_CASE(a_manual_failover_moves_the_connection_and_says_failed_over) { redis_test::run(manual_failover); }
BOOST_AUTO_TEST_CASE(a_killed_master_is_replaced_by_the_one_the_sentinels_promote) { redis_test::run(killed_master); }
BOOST_AUTO_TEST_SUITE_END()
