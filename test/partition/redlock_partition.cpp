// Redlock across network partitions (not crashes): run by scripts/partition-env
// in a network namespace of its own, with its own five masters, where iptables
// cuts masters from the client silently (DROP: no reset, the requests just
// get no answer). The masters keep running and keep their keys.
#include "integration/redlock_support.hpp"
#include "common/partition.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace redlock_test;
namespace partition = dlock::test::partition;

namespace {

redis::redlock_options partition_options(std::chrono::milliseconds ttl) {
  redis::redlock_options o;
  o.ttl = ttl;
  o.master_timeout = 100ms;
  o.retry_count = 1;
  o.retry_delay = 50ms;
  o.retry_jitter = 10ms;
  return o;
}

void cut_masters(const std::vector<std::size_t>& indexes) {
  for (auto i : indexes) partition::isolate_port(port_of(i));
}

/// Waits until no master has `key`: the TTL runs out, or requests queued on a
/// cut connection reach the master after the heal (TCP retransmits them, with
/// its backed-off timer) and the release among them deletes it.
asio::awaitable<bool> key_gone_everywhere(std::string key, std::chrono::milliseconds ttl) {
  auto deadline = std::chrono::steady_clock::now() + ttl + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    bool any = false;
    for (std::size_t i = 0; i < 5; ++i) any = any || redis_cli(i, "EXISTS " + key) != "0";
    if (!any) co_return true;
    co_await sleep_for(100ms);
  }
  co_return false;
}

// (3) One master cut from the client. A lock whose majority included it
// still holds (the other four keep its keys, nobody else gets a majority,
// it extends on four); new locks are taken on the other four.
asio::awaitable<void> one_master_cut(asio::any_io_executor ex) {
  auto masters_a = co_await connect_masters(ex);
  auto masters_b = co_await connect_masters(ex);
  const auto ttl = 5000ms;
  auto key = dlock::test::unique_name("redlock-part-one");
  redis::redlock a(ex, masters_a, key, partition_options(ttl));
  redis::redlock b(ex, masters_b, key, partition_options(ttl));
  auto lock_a = a.acquire(tuple_token);
  auto [ec_a] = co_await std::move(lock_a);
  BOOST_REQUIRE_MESSAGE(!ec_a, ec_a.message());
  BOOST_TEST_MESSAGE("a's majority: " << a.last_outcomes());
  // lock() returns at the majority: wait until the master to be cut has a's key too.
  for (int i = 0; i < 100 && get_key(0, key) != a.token(); ++i) co_await sleep_for(50ms);
  BOOST_REQUIRE(get_key(0, key) == a.token());
  {
    partition::healer healer;
    cut_masters({0});

    auto try_b = b.try_acquire(tuple_token);
    auto [ec_b] = co_await std::move(try_b);
    BOOST_TEST((ec_b == dlock::error::taken), ec_b.message() << " " << b.last_outcomes());
    BOOST_TEST(!b.held());
    BOOST_TEST(a.held(), "a's lock holds with one of its masters cut");

    auto extend_a = a.extend(ttl, tuple_token);
    auto [ec_ext] = co_await std::move(extend_a);
    BOOST_TEST(!ec_ext, "a extends on the four it reaches: " << ec_ext.message() << " " << a.last_outcomes());
    BOOST_TEST(a.held());
    BOOST_TEST(a.validity().count() > 0);
    for (std::size_t i = 1; i < 5; ++i) BOOST_TEST(get_key(i, key) == a.token(), "master " << i);

    auto release_a = a.release(tuple_token);
    auto [ec_rel] = co_await std::move(release_a);
    auto released = a.released_masters();
    BOOST_TEST(!ec_rel, ec_rel.message());
    BOOST_TEST(released >= 3u);
    // The cut master still has a's key (and a's release waits in a TCP queue):
    // b takes the lock on the other four.
    auto lock_b = b.acquire(tuple_token);
    auto [ec_b2] = co_await std::move(lock_b);
    BOOST_TEST(!ec_b2, "b locks with four of five: " << ec_b2.message() << " " << b.last_outcomes());
    BOOST_TEST(b.held());
    BOOST_TEST(!a.held(), "one holder");
    BOOST_TEST_MESSAGE("b's majority with master 0 cut: " << b.last_outcomes());

    // A fresh key, never seen by the cut master: taken with four of five.
    redis::redlock c(ex, masters_a, dlock::test::unique_name("redlock-part-fresh"), partition_options(ttl));
    auto lock_c = c.acquire(tuple_token);
    auto [ec_c] = co_await std::move(lock_c);
    BOOST_TEST(!ec_c, "a new lock with four of five: " << ec_c.message() << " " << c.last_outcomes());
    auto release_c = c.release(tuple_token);
    co_await std::move(release_c);
  }
  // Healed: b still holds (a majority of the masters has its token).
  std::size_t with_b = 0;
  for (std::size_t i = 0; i < 5; ++i) with_b += get_key(i, key) == b.token() ? 1 : 0;
  BOOST_TEST(with_b >= 3u, "b's token on " << with_b << " masters after the heal");
  auto release_b = b.release(tuple_token);
  auto [ec_rel_b] = co_await std::move(release_b);
  BOOST_TEST(!ec_rel_b, ec_rel_b.message());
  BOOST_TEST(co_await key_gone_everywhere(key, ttl), "a key is left behind");
  close_all(masters_a);
  close_all(masters_b);
}

// A lock kept alive by auto-extension while one of its masters stays cut for
// several TTLs: the extensions succeed on the other four, the lock is never
// lost, and nobody else gets it meanwhile.
asio::awaitable<void> auto_extend_across_a_cut(asio::any_io_executor ex) {
  auto masters_a = co_await connect_masters(ex);
  auto masters_b = co_await connect_masters(ex);
  const auto ttl = 1000ms;
  auto key = dlock::test::unique_name("redlock-part-extend");
  auto options = partition_options(ttl);
  options.auto_extend = true;
  redis::redlock a(ex, masters_a, key, options);
  redis::redlock b(ex, masters_b, key, partition_options(ttl));
  auto lock_a = a.acquire(tuple_token);
  auto [ec_a] = co_await std::move(lock_a);
  BOOST_REQUIRE_MESSAGE(!ec_a, ec_a.message());
  {
    partition::healer healer;
    cut_masters({0});
    for (int round = 0; round < 6; ++round) {  // three TTLs
      co_await sleep_for(ttl / 2);
      auto try_b = b.try_acquire(tuple_token);
      auto [ec_b] = co_await std::move(try_b);
      BOOST_TEST((ec_b == dlock::error::taken), "round " << round << ": " << ec_b.message() << " " << b.last_outcomes());
    }
    BOOST_TEST(!a.loss().lost(), a.loss().reason().message() << " " << a.last_outcomes());
    BOOST_TEST(a.held());
    BOOST_TEST_MESSAGE("a's last extension with master 0 cut: " << a.last_outcomes());
  }
  auto release_a = a.release(tuple_token);
  auto [ec_rel] = co_await std::move(release_a);
  BOOST_TEST(!ec_rel, ec_rel.message());
  BOOST_TEST(co_await key_gone_everywhere(key, ttl), "a key is left behind");
  close_all(masters_a);
  close_all(masters_b);
}

// (4) Three of five masters cut: no majority, acquire fails with no_quorum,
// and once healed (and the TTL passed) no key is left on any master.
asio::awaitable<void> three_masters_cut(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex);
  const auto ttl = 2000ms;
  auto key = dlock::test::unique_name("redlock-part-three");
  redis::redlock a(ex, masters, key, partition_options(ttl));
  redis::redlock b(ex, masters, key, partition_options(ttl));
  {
    partition::healer healer;
    cut_masters({2, 3, 4});
    auto lock_a = a.acquire(tuple_token);
    auto [ec] = co_await std::move(lock_a);
    BOOST_TEST((ec == dlock::error::no_quorum), ec.message() << " " << a.last_outcomes());
    BOOST_TEST(!a.held());
    BOOST_TEST(a.last_outcomes().find("=timed_out") != std::string::npos, a.last_outcomes());
    for (std::size_t i = 0; i < 2; ++i) {
      bool gone = co_await key_gone_eventually(i, key);
      BOOST_TEST(gone, "key left on reachable master " << i);
    }
  }
  BOOST_TEST(co_await key_gone_everywhere(key, ttl), "a key is left behind after the heal");
  // Nothing blocks the lock afterwards, once the healed connections caught up.
  for (std::size_t i = 2; i < 5; ++i) co_await answers_again(*masters[i]);
  auto lock_b = b.acquire(tuple_token);
  auto [ec_b] = co_await std::move(lock_b);
  BOOST_TEST(!ec_b, ec_b.message() << " " << b.last_outcomes());
  auto release_b = b.release(tuple_token);
  co_await std::move(release_b);
  close_all(masters);
}

// (5) A SET sent into a cut, on a connection the client then gives up on
// (the command times out, the silent server's connection is reset), must
// never reach the server after the heal: TCP would go on retransmitting it
// after a plain close, and the key would then lock for nobody until its TTL.
// The single-instance lock, one master.
asio::awaitable<void> abandoned_set_not_delivered_after_the_heal(asio::any_io_executor ex) {
  auto endpoints = dlock::test::redis_masters();
  redis::options o;
  o.host = endpoints[0].host;
  o.port = endpoints[0].port;
  o.command_timeout = 300ms;
  o.reconnect_min = 20ms;
  o.reconnect_max = 200ms;
  auto conn = std::make_shared<redis::connection>(ex, o);
  auto connect = conn->connect(tuple_token);
  auto [connect_ec] = co_await std::move(connect);
  BOOST_REQUIRE_MESSAGE(!connect_ec, connect_ec.message());
  auto key = dlock::test::unique_name("lock-part-late-set");
  redis::lock_options lo;
  lo.ttl = 30000ms;
  redis::lock lock(*conn, key, lo);
  {
    partition::healer healer;
    cut_masters({0});
    auto attempt = lock.try_acquire(tuple_token);
    auto [ec] = co_await std::move(attempt);
    BOOST_TEST(!!ec, "try_acquire succeeded through a cut");
    BOOST_TEST(!lock.held());
    // The silent server's connection is reset (its commands unanswered).
    for (int i = 0; i < 100 && conn->state() == redis::connection_state::connected; ++i) co_await sleep_for(20ms);
    BOOST_TEST((conn->state() != redis::connection_state::connected), "the connection to the silent master stayed");
    co_await sleep_for(1000ms);
  }
  // TCP's retransmission timer has backed off to seconds by now: watch long
  // enough for a retransmitted SET to land.
  bool seen = false;
  for (int i = 0; i < 400 && !seen; ++i) {  // 8 s
    seen = get_key(0, key) != "";
    if (!seen) co_await sleep_for(20ms);
  }
  BOOST_TEST(!seen, "a SET sent before the cut reached the master after the heal: " << get_key(0, key));
  conn->close();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redlock_partition)

BOOST_AUTO_TEST_CASE(a_set_abandoned_in_a_cut_never_reaches_the_master_after_the_heal) {
  run(abandoned_set_not_delivered_after_the_heal);
}

BOOST_AUTO_TEST_CASE(one_master_cut_keeps_the_lock_and_admits_no_second_holder) { run(one_master_cut); }
BOOST_AUTO_TEST_CASE(auto_extension_keeps_the_lock_across_a_cut_master) { run(auto_extend_across_a_cut); }
BOOST_AUTO_TEST_CASE(three_masters_cut_fail_with_no_quorum_and_leave_no_key) { run(three_masters_cut); }

BOOST_AUTO_TEST_SUITE_END()
