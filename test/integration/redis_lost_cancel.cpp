// A cancellation that comes while a step's completion is already queued.
//
// A contended acquire pauses between attempts on a timer. If the loop is
// busy when that timer expires, the timer's completion is queued, not run;
// a cancellation emitted just then (by a handler queued ahead of it: here a
// timer of the test's own, expiring a little earlier) finds no timer wait to
// cancel. Before the fix the acquire then went on with its next attempt and
// waited until its own wait ran out (timed_out), and `dlock lock --timeout`
// on one Redis server never ended. The acquire must record the cancellation
// and end with operation_aborted, for a lock, a semaphore's lease and Redlock.
#include "redis_support.hpp"
#include "redlock_support.hpp"

#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/redis/semaphore.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <thread>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using dlock::error_code;
using namespace std::chrono_literals;
using redis_test::master_options;

namespace {

constexpr auto tuple_token = asio::as_tuple(asio::deferred);

// The pause between attempts, and when the test looks: the first attempt's
// answer comes well within `answered`, so its pause expires between
// `answered + pause_lead` (the test's timer, earlier) and `answered + block`.
constexpr auto retry_delay = 300ms;
constexpr auto answered = 100ms;
constexpr auto pause_lead = 150ms;
constexpr auto block = 400ms;

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(tuple_token);
}

// `waiter` is contended (someone else holds its key). Its acquire is
// cancelled from a handler that runs just before its pause's completion.
template <class Lock>
asio::awaitable<void> cancel_just_before_the_pause_completes(Lock& waiter) {
  auto ex = co_await asio::this_coro::executor;
  asio::cancellation_signal signal;
  auto result = std::make_shared<std::optional<error_code>>();
  waiter.acquire(asio::bind_cancellation_slot(signal.slot(), [result](error_code ec) { *result = ec; }));
  co_await sleep_for(answered);  // the first attempt was answered: `taken`, the pause is on
  asio::steady_timer ahead(ex, pause_lead);
  // The loop is blocked past both expiries: both completions are queued at
  // once, the test's first (it expires first).
  asio::post(ex, [] { std::this_thread::sleep_for(block); });
  co_await ahead.async_wait(tuple_token);
  signal.emit(asio::cancellation_type::terminal);
  for (int i = 0; i < 400 && !*result; ++i) co_await sleep_for(10ms);
  BOOST_REQUIRE_MESSAGE(result->has_value(), "the cancelled acquire never completed");
  BOOST_TEST((**result == asio::error::operation_aborted), (*result)->message());
  BOOST_TEST(!waiter.held());
}

template <class Lock>
asio::awaitable<error_code> acquire(Lock& l) {
  auto [ec] = co_await l.acquire(tuple_token);
  co_return ec;
}

asio::awaitable<void> lock_case() {
  redis::connection c(co_await asio::this_coro::executor, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("lost-cancel");
  redis::lock holder(c, key, {.ttl = 10000ms});
  BOOST_REQUIRE(!co_await acquire(holder));
  redis::lock waiter(c, key, {.ttl = 10000ms, .wait = 5000ms, .retry_delay = retry_delay, .retry_jitter = 0ms});
  co_await cancel_just_before_the_pause_completes(waiter);
  co_await holder.release(tuple_token);
}

asio::awaitable<void> semaphore_case() {
  redis::connection c(co_await asio::this_coro::executor, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("lost-cancel-sem");
  redis::semaphore holder(c, key, 1, {.ttl = 10000ms});
  BOOST_REQUIRE(!co_await acquire(holder));
  redis::semaphore waiter(c, key, 1,
                          {.ttl = 10000ms, .wait = 5000ms, .retry_delay = retry_delay, .retry_jitter = 0ms});
  co_await cancel_just_before_the_pause_completes(waiter);
  co_await holder.release(tuple_token);
}

asio::awaitable<void> redlock_case() {
  auto ex = co_await asio::this_coro::executor;
  auto masters = co_await redlock_test::connect_masters(ex);
  auto key = dlock::test::unique_name("lost-cancel-redlock");
  redis::redlock holder(ex, masters, key, {.ttl = 10000ms});
  BOOST_REQUIRE(!co_await acquire(holder));
  redis::redlock waiter(ex, masters, key,
                        {.ttl = 10000ms, .retry_count = -1, .retry_delay = retry_delay, .retry_jitter = 0ms, .wait_limit = 5000ms});
  co_await cancel_just_before_the_pause_completes(waiter);
  co_await holder.release(tuple_token);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_lost_cancel)

BOOST_AUTO_TEST_CASE(a_lock_acquire_cancelled_as_its_pause_completes_ends) { redis_test::run(lock_case()); }
BOOST_AUTO_TEST_CASE(a_semaphore_acquire_cancelled_as_its_pause_completes_ends) {
  redis_test::run(semaphore_case());
}
BOOST_AUTO_TEST_CASE(a_redlock_acquire_cancelled_as_its_pause_completes_ends) { redis_test::run(redlock_case()); }

BOOST_AUTO_TEST_SUITE_END()
