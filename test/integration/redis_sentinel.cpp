// A connection behind Sentinel, against the real Sentinel set of
// scripts/servers (one master, two replicas, three sentinels): discovery,
// each way it fails, the connection following a failover (manual, and a
// killed master), every holder told failed_over, fencing tokens that still
// grow, and replica acknowledgement (WAIT). Every case leaves the set
// settled for the next.
#include "redis_support.hpp"

#include <dlock/error.hpp>
#include <dlock/observer.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/redis/semaphore.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <array>
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
  co_await settle();  // after another program's failover
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
  co_await settle();
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

// ---- holders told ----

// A lock, a fenced lock and a semaphore's lease held on the master; after
// `fault` every one is lost with failed_over, none keeps believing.
asio::awaitable<void> holders_told(asio::any_io_executor ex, bool kill) {
  co_await settle();
  redis::connection c(ex, sentinel_options());
  co_await c.connect();
  int old_port = co_await server_port(c);
  auto key = dlock::test::unique_name("dlock-test:sentinel");
  redis::lock plain(c, key + ":plain", {.ttl = 30s, .wait = 0ms});
  redis::lock fenced(c, key + ":fenced", {.ttl = 30s, .wait = 5s, .fencing = true});
  redis::semaphore lease(c, key + ":lease", 2, {.ttl = 30s, .wait = 0ms});
  co_await plain.acquire();
  co_await fenced.acquire();
  co_await lease.acquire();
  auto old_name = dlock::test::sentinel_node_name(static_cast<std::uint16_t>(old_port));
  if (kill) {
    dlock::test::server_action("kill", old_name);
  } else {
    redis::connection sentinel(ex, plain_options(dlock::test::sentinels()[2]));
    co_await sentinel.connect();
    co_await must(sentinel, "SENTINEL", "FAILOVER", dlock::test::sentinel_master_name());
    sentinel.close();
  }
  std::array<redis::basic_hold*, 3> holds{&plain, &fenced, &lease};
  for (auto* hold : holds) {
    auto [reason] = co_await hold->loss().wait(with_ec);
    BOOST_CHECK_MESSAGE(reason == dlock::error::failed_over, reason.message());
    BOOST_CHECK(!hold->held());
    auto [released] = co_await hold->release(with_ec);
    BOOST_CHECK_MESSAGE(released == dlock::error::failed_over, released.message());  // release tells the loss
  }
  BOOST_CHECK_NE(co_await moved_from(c, old_port, 60s), old_port);
  // The lock works on the new master, and a token still grows.
  auto before = fenced.fencing_token();
  co_await fenced.acquire();
  BOOST_CHECK_GT(fenced.fencing_token(), before);
  co_await fenced.release();
  c.close();
  if (kill) dlock::test::server_action("restart", old_name);
  co_await settle();
}

asio::awaitable<void> told_on_manual_failover(asio::any_io_executor ex) { co_await holders_told(ex, false); }
asio::awaitable<void> told_on_killed_master(asio::any_io_executor ex) { co_await holders_told(ex, true); }

// The new master's counter behind the tokens given (replication lost the
// last increments; set by hand here): the next token is still above them.
asio::awaitable<void> tokens_still_grow(asio::any_io_executor ex) {
  co_await settle();
  redis::connection c(ex, sentinel_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("dlock-test:sentinel:fencing");
  redis::lock fenced(c, key, {.ttl = 30s, .wait = 2s, .fencing = true});
  for (int i = 0; i < 5; ++i) {
    co_await fenced.acquire();
    co_await fenced.release();
  }
  co_await fenced.acquire();
  auto last = fenced.fencing_token();
  co_await fenced.release();
  co_await must(c, "SET", key + ":fencing", "1");  // as a failover would leave it
  co_await fenced.acquire();
  BOOST_CHECK_GT(fenced.fencing_token(), last);
  co_await fenced.release();
  auto counter = co_await must(c, "GET", key + ":fencing");
  BOOST_CHECK_GT(std::stoll(std::string(counter.string())), last);  // raised for every client
  c.close();
}

// Redlock with one master behind Sentinel: a failover takes that master's
// vote away. Over two masters the hold no longer has a majority (lost,
// failed_over); over three it still has two (held).
asio::awaitable<void> redlock_votes(asio::any_io_executor ex) {
  co_await settle();
  auto behind_sentinel = std::make_shared<redis::connection>(ex, sentinel_options());
  auto first = std::make_shared<redis::connection>(ex, redis_test::master_options(0));
  auto second = std::make_shared<redis::connection>(ex, redis_test::master_options(1));
  for (auto* c : {behind_sentinel.get(), first.get(), second.get()}) co_await c->connect();
  int old_port = co_await server_port(*behind_sentinel);
  auto key = dlock::test::unique_name("dlock-test:sentinel:redlock");
  redis::redlock_options o;
  o.ttl = 30s;
  redis::redlock two(ex, {behind_sentinel, first}, key + ":two", o);
  redis::redlock three(ex, {behind_sentinel, first, second}, key + ":three", o);
  co_await two.acquire();
  co_await three.acquire();
  redis::connection sentinel(ex, plain_options(dlock::test::sentinels()[0]));
  co_await sentinel.connect();
  co_await must(sentinel, "SENTINEL", "FAILOVER", dlock::test::sentinel_master_name());
  sentinel.close();
  auto [reason] = co_await two.loss().wait(with_ec);
  BOOST_CHECK_MESSAGE(reason == dlock::error::failed_over, reason.message());
  co_await moved_from(*behind_sentinel, old_port, 60s);
  BOOST_CHECK(three.held());
  BOOST_CHECK(!three.loss().lost());
  co_await two.release(with_ec);
  co_await three.release();
  for (auto* c : {behind_sentinel.get(), first.get(), second.get()}) c->close();
  co_await settle();
}

// ---- replica acknowledgement ----

asio::awaitable<void> acknowledged_by_replicas(asio::any_io_executor ex) {
  co_await settle();
  redis::connection c(ex, sentinel_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("dlock-test:sentinel:wait");
  redis::lock plain(c, key + ":plain", {.ttl = 30s, .wait = 0ms, .replicas = 2, .replica_timeout = 2000ms});
  redis::lock fenced(c, key + ":fenced", {.ttl = 30s, .wait = 0ms, .fencing = true, .replicas = 2,
                                           .replica_timeout = 2000ms});
  redis::semaphore leases(c, key + ":leases", 2, {.ttl = 30s, .wait = 0ms, .replicas = 2, .replica_timeout = 2000ms});
  co_await plain.acquire();
  co_await fenced.acquire();
  co_await leases.acquire();
  BOOST_CHECK_GT(fenced.fencing_token(), 0);
  co_await plain.extend(30s);
  co_await leases.extend(30s);
  co_await plain.release();
  co_await fenced.release();
  co_await leases.release();
  c.close();
}

// Both replicas stopped: the key reaches none, the acquire fails and
// leaves no key; an extension fails the same way.
asio::awaitable<void> not_replicated(asio::any_io_executor ex) {
  co_await settle();
  redis::connection c(ex, sentinel_options());
  co_await c.connect();
  int master = co_await server_port(c);
  auto key = dlock::test::unique_name("dlock-test:sentinel:unreplicated");
  redis::lock held(c, key + ":held", {.ttl = 30s, .wait = 0ms, .replicas = 1, .replica_timeout = 200ms});
  co_await held.acquire();
  std::vector<std::string> paused;
  for (const auto& node : dlock::test::sentinel_nodes())
    if (node.port != master) paused.push_back(dlock::test::sentinel_node_name(node.port));
  for (const auto& name : paused) dlock::test::server_action("pause", name);
  redis::lock plain(c, key, {.ttl = 30s, .wait = 0ms, .replicas = 1, .replica_timeout = 200ms});
  redis::semaphore leases(c, key + ":leases", 2, {.ttl = 30s, .wait = 0ms, .replicas = 1, .replica_timeout = 200ms});
  auto [ec] = co_await plain.acquire(with_ec);
  auto [leased] = co_await leases.acquire(with_ec);
  auto [extended] = co_await held.extend(30s, with_ec);
  for (const auto& name : paused) dlock::test::server_action("resume", name);
  BOOST_CHECK_MESSAGE(ec == dlock::error::not_replicated, ec.message());
  BOOST_CHECK_MESSAGE(leased == dlock::error::not_replicated, leased.message());
  BOOST_CHECK(!plain.held());
  BOOST_CHECK(!leases.held());
  BOOST_CHECK_MESSAGE(extended == dlock::error::not_replicated, extended.message());
  co_await sleep_for(100ms);  // the background deletes
  auto left = co_await must(c, "EXISTS", key);
  BOOST_CHECK_EQUAL(left.integer(), 0);
  auto lease_left = co_await must(c, "ZCARD", key + ":leases");  // the lease taken, then removed
  BOOST_CHECK_EQUAL(lease_left.integer(), 0);
  co_await held.release(with_ec);
  c.close();
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
BOOST_AUTO_TEST_CASE(every_holder_is_told_failed_over_at_a_manual_failover) { redis_test::run(told_on_manual_failover); }
BOOST_AUTO_TEST_CASE(every_holder_is_told_failed_over_when_the_master_is_killed) { redis_test::run(told_on_killed_master); }
BOOST_AUTO_TEST_CASE(fencing_tokens_grow_past_a_counter_that_went_back) { redis_test::run(tokens_still_grow); }
BOOST_AUTO_TEST_CASE(a_redlock_loses_a_hold_whose_majority_failed_over_and_keeps_one_that_has_one) {
  redis_test::run(redlock_votes);
}
BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(replica_acknowledgement)
BOOST_AUTO_TEST_CASE(an_acquire_and_an_extension_acknowledged_by_both_replicas_succeed) {
  redis_test::run(acknowledged_by_replicas);
}
BOOST_AUTO_TEST_CASE(an_acquire_no_replica_acknowledged_fails_and_leaves_no_key) { redis_test::run(not_replicated); }
BOOST_AUTO_TEST_SUITE_END()
