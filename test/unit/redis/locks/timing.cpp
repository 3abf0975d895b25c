// The validity of a Redis hold (one formula for every Redis lock) and the
// retry schedule between attempts, without any server.
#include "redis/locks/algorithm/acquire_machine.hpp"
#include "redis/locks/algorithm/timing.hpp"

#include <boost/test/unit_test.hpp>

#include <random>
#include <set>

using namespace std::chrono_literals;
using dlock::redis::detail::drift_rule;
using dlock::redis::detail::retry_schedule;
using dlock::redis::detail::steady_time;
namespace detail = dlock::redis::detail;

namespace {
const steady_time t0{std::chrono::seconds(1000)};
}

BOOST_AUTO_TEST_SUITE(redis_timing)

BOOST_AUTO_TEST_CASE(validity_is_ttl_minus_elapsed_minus_drift) {
  drift_rule rule{0.01, 2ms};
  BOOST_CHECK(detail::drift(10000ms, rule) == 102ms);
  BOOST_CHECK(detail::drift(150ms, rule) == 3500us);  // 1.5 ms + 2 ms: no rounding away
  auto until = detail::valid_until(t0, 10000ms, rule);
  BOOST_CHECK(until == t0 + 9898ms);
  BOOST_CHECK(detail::remaining(until, t0 + 898ms) == 9000ms);
  BOOST_CHECK(detail::remaining(until, t0 + 9898ms) == 0ms);
  BOOST_CHECK(detail::remaining(until, t0 + 20000ms) == 0ms);  // never negative
  BOOST_CHECK(detail::validity_left(until, t0 + 9900ms) == -2ms);
  // Rounded down: never overstated.
  BOOST_CHECK(detail::remaining(until, t0 + 898ms + 1us) == 8999ms);
}

BOOST_AUTO_TEST_CASE(retry_counts_attempts_and_adds_jitter) {
  retry_schedule retry(10, 200ms, 100ms, std::nullopt);  // Redlock's defaults
  BOOST_TEST(retry.next(t0, 0.0)->count() == 100);
  BOOST_TEST(retry.next(t0, 0.5)->count() == 200);
  BOOST_TEST(retry.next(t0, 0.9999)->count() == 300);
  for (int i = 0; i < 7; ++i) BOOST_TEST(retry.next(t0, 0.5).has_value());
  BOOST_TEST(retry.attempts() == 11);
  BOOST_TEST(!retry.next(t0, 0.5).has_value());  // 1 + 10 retries made
}

BOOST_AUTO_TEST_CASE(retry_stops_at_the_deadline) {
  retry_schedule retry(-1, 200ms, 0ms, t0 + 1000ms);
  BOOST_TEST(retry.next(t0 + 700ms, 0.5).has_value());
  BOOST_TEST(!retry.next(t0 + 800ms, 0.5).has_value());  // 800 + 200 reaches the deadline
  retry_schedule no_wait(-1, 100ms, 50ms, t0);  // redis::lock with wait 0: one attempt
  BOOST_TEST(!no_wait.next(t0, 0.5).has_value());
}

BOOST_AUTO_TEST_CASE(no_retries_means_one_attempt) {
  retry_schedule none(0, 200ms, 100ms, std::nullopt);
  BOOST_TEST(!none.next(t0, 0.5).has_value());
  retry_schedule clamped(1, 10ms, 50ms, std::nullopt);
  BOOST_TEST(clamped.next(t0, 0.0)->count() == 0);  // a negative pause is clamped to zero
}

BOOST_AUTO_TEST_CASE(pauses_stay_within_the_jitter_and_vary) {
  retry_schedule retry(-1, 100ms, 50ms, std::nullopt);
  std::minstd_rand random(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::set<long long> seen;
  for (int i = 0; i < 200; ++i) {
    auto pause = retry.next(t0, unit(random));
    BOOST_REQUIRE(pause.has_value());
    BOOST_CHECK(*pause >= 50ms && *pause <= 150ms);
    seen.insert(pause->count());
  }
  BOOST_CHECK_GT(seen.size(), 20u);
}

BOOST_AUTO_TEST_SUITE_END()
