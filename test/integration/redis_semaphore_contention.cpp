// dlock::redis::semaphore under contention against a real redis-server: N+1
// (and many more) contenders on several connections never hold more than N
// leases, counted in process and on the server at every hold; acquires
// cancelled at random points leave no member behind.
#include "redis_semaphore_support.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>

#include <optional>

using namespace semaphore_test;

namespace {

constexpr auto rethrow = [](std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
};

asio::awaitable<void> contender(redis::connection& c, std::string key, std::shared_ptr<census> k,
                                asio::steady_timer& all_done, int rounds, std::uint32_t seed) {
  auto o = options(10000ms, 2ms);
  o.wait = 600000ms;
  redis::semaphore s(c, key, std::size_t(k->max_leases), o);
  std::minstd_rand rng(seed);
  for (int i = 0; i < rounds; ++i) {
    if (auto ec = co_await acquire(s)) {
      ++k->errors;
      BOOST_TEST_MESSAGE("acquire failed: " << ec.message());
      continue;
    }
    co_await hold_once(c, s, *k, rng);
  }
  if (++k->finished == k->total) all_done.cancel();
}

asio::awaitable<void> contend(asio::any_io_executor ex, int leases, int contenders, int conns, int rounds) {
  auto cs = co_await connect_all(ex, conns);
  auto key = dlock::test::unique_name("sem-contend");
  auto k = std::make_shared<census>();
  k->max_leases = leases;
  k->total = contenders;
  asio::steady_timer all_done(ex, asio::steady_timer::time_point::max());
  for (int i = 0; i < contenders; ++i) {
    auto& c = *cs[std::size_t(i % conns)];
    asio::co_spawn(ex, contender(c, key, k, all_done, rounds, std::uint32_t(101 + i)), rethrow);
  }
  co_await all_done.async_wait(tuple_token);
  BOOST_TEST_MESSAGE(leases << " leases, " << contenders << " contenders: " << k->entries << " holds");
  BOOST_CHECK_EQUAL(k->entries, contenders * rounds);
  BOOST_CHECK_EQUAL(k->over, 0);
  BOOST_CHECK_EQUAL(k->not_ours, 0);
  BOOST_CHECK_EQUAL(k->errors, 0);
  BOOST_CHECK_EQUAL(k->most_inside, leases);  // the leases were really shared
  auto left = co_await count(*cs[0], key);
  BOOST_CHECK_EQUAL(left, 0);
}

asio::awaitable<void> n_plus_one_contenders(asio::any_io_executor ex) {
  co_await contend(ex, 3, 4, 2, 100);  // N + 1 contenders on two connections
  co_await contend(ex, 2, 12, 3, 25);  // many more than N, on three connections
  co_await contend(ex, 1, 2, 2, 100);  // N = 1: a mutex
}

// One acquire, cancelled after a random delay (often at once, before the
// script is written; else while it runs, during a pause, or while waiting
// for an earlier attempt's removal), terminal or partial.
asio::awaitable<error_code> cancelled_acquire(redis::semaphore& s, std::minstd_rand& rng) {
  asio::cancellation_signal signal;
  auto result = std::make_shared<std::optional<error_code>>();
  s.acquire(asio::bind_cancellation_slot(signal.slot(), [result](error_code ec) { *result = ec; }));
  auto delay = std::chrono::microseconds(rng() % 4000);
  if (rng() % 4 != 0) co_await sleep_for(delay);
  auto type = rng() % 2 ? asio::cancellation_type::terminal : asio::cancellation_type::partial;
  if (!*result) signal.emit(type);
  while (!*result) co_await sleep_for(200us);
  co_return **result;
}

asio::awaitable<void> cancelled_contender(redis::connection& c, std::string key, std::shared_ptr<census> k,
                                          asio::steady_timer& all_done, std::uint32_t seed) {
  auto o = options(60000ms, 1ms);  // no member may expire before the end: only removals count
  o.wait = 600000ms;
  redis::semaphore s(c, key, std::size_t(k->max_leases), o);
  std::minstd_rand rng(seed);
  for (int i = 0; i < 60; ++i) {
    auto ec = co_await cancelled_acquire(s, rng);
    if (!ec) {
      co_await hold_once(c, s, *k, rng);
    } else if (ec == asio::error::operation_aborted) {
      ++k->aborted;
    } else {
      ++k->errors;
      BOOST_TEST_MESSAGE("acquire failed: " << ec.message());
    }
  }
  if (++k->finished == k->total) all_done.cancel();
}

asio::awaitable<void> random_cancellation(asio::any_io_executor ex) {
  auto cs = co_await connect_all(ex, 2);
  auto key = dlock::test::unique_name("sem-cancel");
  auto k = std::make_shared<census>();
  k->max_leases = 2;
  k->total = 6;
  asio::steady_timer all_done(ex, asio::steady_timer::time_point::max());
  for (int i = 0; i < k->total; ++i) {
    auto& c = *cs[std::size_t(i % 2)];
    asio::co_spawn(ex, cancelled_contender(c, key, k, all_done, std::uint32_t(17 + i)), rethrow);
  }
  co_await all_done.async_wait(tuple_token);
  co_await sleep_for(200ms);  // the background removals are answered
  BOOST_TEST_MESSAGE(k->entries << " holds, " << k->aborted << " cancelled acquires");
  BOOST_CHECK_GT(k->aborted, 0);
  BOOST_CHECK_GT(k->entries, 0);
  BOOST_CHECK_EQUAL(k->over, 0);
  BOOST_CHECK_EQUAL(k->not_ours, 0);
  BOOST_CHECK_EQUAL(k->errors, 0);
  auto left = co_await count(*cs[0], key);
  BOOST_CHECK_EQUAL(left, 0);
  auto exists = co_await must(*cs[0], "EXISTS", key);
  BOOST_CHECK_EQUAL(exists.integer(), 0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_semaphore_contention)

BOOST_AUTO_TEST_CASE(n_plus_one_contenders_never_exceed_n_holders) { run(&n_plus_one_contenders); }
BOOST_AUTO_TEST_CASE(cancellation_at_random_points_leaves_no_member) { run(&random_cancellation); }

BOOST_AUTO_TEST_SUITE_END()
