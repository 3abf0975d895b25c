// dlock::redis::semaphore against a real redis-server: the sorted set on the
// server (members, scores from the server's clock, the key's expiry), bad
// arguments, taken / timed_out when full, a crashed holder's lease coming
// back after its TTL, auto-extension and its cap, release after a loss,
// destruction while holding or waiting, with_lock. Contention and random
// cancellation: redis_semaphore_contention.cpp.
#include "redis_semaphore_support.hpp"

#include <dlock/with_lock.hpp>

#include <optional>

using namespace semaphore_test;

namespace {

asio::awaitable<void> acquire_and_release(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("sem");
  redis::semaphore a(c, key, 2, options(5000ms));
  redis::semaphore b(c, key, 2, options(5000ms));
  BOOST_CHECK(!a.held());
  BOOST_CHECK(a.validity() == 0ms);
  BOOST_REQUIRE(!co_await acquire(a));
  BOOST_CHECK(a.held());
  BOOST_CHECK(a.validity() > 4000ms && a.validity() <= 5000ms);
  BOOST_CHECK_EQUAL(a.token().size(), 32u);
  // The member's score is its expiry on the server's clock.
  auto score = co_await must(c, "ZSCORE", key, a.token());
  auto time = co_await must(c, "TIME");
  auto now_ms = std::stoll(std::string(time.elements()[0].string())) * 1000 +
                std::stoll(std::string(time.elements()[1].string())) / 1000;
  auto left = std::stoll(std::string(score.string())) - now_ms;
  BOOST_CHECK_MESSAGE(left > 4000 && left <= 5000, "lease ends in " << left << " ms");
  auto pttl = co_await must(c, "PTTL", key);  // an abandoned set disappears
  BOOST_CHECK(pttl.integer() > 4000 && pttl.integer() <= 5000);
  BOOST_CHECK(co_await acquire(a) == dlock::error::already_held);  // one lease per object
  BOOST_REQUIRE(!co_await try_acquire(b));
  auto zcard1 = co_await count(c, key);
  BOOST_CHECK_EQUAL(zcard1, 2);
  auto first = a.token();
  BOOST_CHECK(!co_await release(a));
  BOOST_CHECK(!a.held());
  BOOST_CHECK(!co_await member(c, key, first));
  BOOST_CHECK(co_await member(c, key, b.token()));  // only ours was removed
  BOOST_CHECK(!co_await release(a));                 // a second release is a no-op success
  BOOST_CHECK(co_await extend(a, 1000ms) == dlock::error::not_held);
  BOOST_REQUIRE(!co_await try_acquire(a));
  BOOST_CHECK_NE(a.token(), first);
  BOOST_CHECK(!co_await extend(a, 8000ms));
  pttl = co_await must(c, "PTTL", key);
  BOOST_CHECK(pttl.integer() > 7000);  // the key outlives its longest lease
  BOOST_CHECK(!co_await release(a));
  BOOST_CHECK(!co_await release(b));
  auto exists = co_await must(c, "EXISTS", key);
  BOOST_CHECK_EQUAL(exists.integer(), 0);
}

asio::awaitable<void> bad_arguments(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto before = c.stats().commands;
  auto key = dlock::test::unique_name("sem-bad");
  redis::semaphore no_key(c, "", 2, options(1000ms));
  BOOST_CHECK(co_await acquire(no_key) == dlock::error::invalid_argument);
  redis::semaphore no_leases(c, key, 0, options(1000ms));
  BOOST_CHECK(co_await try_acquire(no_leases) == dlock::error::invalid_argument);
  redis::semaphore zero_ttl(c, key, 2, options(0ms));
  BOOST_CHECK(co_await acquire(zero_ttl) == dlock::error::invalid_argument);
  redis::semaphore negative_ttl(c, key, 2, options(-5ms));
  BOOST_CHECK(co_await acquire_for(negative_ttl, 100ms) == dlock::error::invalid_argument);
  auto o = options(1000ms);
  o.retry_jitter = -1ms;
  redis::semaphore bad_jitter(c, key, 2, o);
  BOOST_CHECK(co_await acquire(bad_jitter) == dlock::error::invalid_argument);
  redis::semaphore fine(c, key, 2, options(1000ms));
  BOOST_CHECK(co_await acquire_for(fine, 0ms) == dlock::error::invalid_argument);
  BOOST_CHECK_EQUAL(c.stats().commands, before);  // nothing was sent
  BOOST_REQUIRE(!co_await acquire(fine));
  BOOST_CHECK(co_await extend(fine, 0ms) == dlock::error::invalid_argument);
  BOOST_CHECK(!co_await release(fine));
  // A key holding something else: the server refuses, nothing is changed.
  auto string_key = dlock::test::unique_name("sem-string");
  co_await must(c, "SET", string_key, "x", "PX", "10000");
  redis::semaphore wrong(c, string_key, 2, options(1000ms));
  auto ec = co_await acquire(wrong);
  BOOST_CHECK_MESSAGE(ec == redis::error::wrong_type, ec.message());
  BOOST_CHECK(!wrong.held());
  auto value = co_await must(c, "GET", string_key);
  BOOST_CHECK_EQUAL(value.string(), "x");
}

asio::awaitable<void> full_is_taken_or_timed_out(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("sem-full");
  redis::semaphore h1(c, key, 2, options(10000ms));
  redis::semaphore h2(c, key, 2, options(10000ms));
  BOOST_REQUIRE(!co_await acquire(h1));
  BOOST_REQUIRE(!co_await acquire(h2));
  auto waiting = options(10000ms, 20ms);
  waiting.wait = 150ms;
  redis::semaphore third(c, key, 2, waiting);
  BOOST_CHECK(co_await try_acquire(third) == dlock::error::taken);
  auto start = std::chrono::steady_clock::now();
  BOOST_CHECK(co_await acquire_for(third, 200ms) == dlock::error::timed_out);
  BOOST_CHECK(std::chrono::steady_clock::now() - start >= 100ms);
  BOOST_CHECK(co_await acquire(third) == dlock::error::timed_out);  // options().wait
  BOOST_CHECK(!third.held());
  auto zcard2 = co_await count(c, key);  // nothing left by the failed attempts
  BOOST_CHECK_EQUAL(zcard2, 2);
  BOOST_CHECK(co_await member(c, key, h1.token()));
  BOOST_CHECK(co_await member(c, key, h2.token()));
  BOOST_CHECK(!co_await release(h1));
  BOOST_REQUIRE(!co_await try_acquire(third));
  BOOST_CHECK(!co_await release(third));
  BOOST_CHECK(!co_await release(h2));
}

// A holder that crashes never gives its lease back: it returns when its TTL
// has passed on the server, and the next acquire drops it.
asio::awaitable<void> crashed_holder(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("sem-crash");
  auto doomed = std::make_unique<redis::connection>(ex, master_options());
  co_await doomed->connect();
  auto crashed = std::make_unique<redis::semaphore>(*doomed, key, 1, options(300ms));
  auto sent = std::chrono::steady_clock::now();  // the lease starts after this on the server
  BOOST_REQUIRE(!co_await acquire(*crashed));
  auto token = crashed->token();
  doomed.reset();   // the connection is gone: its holder cannot give anything back
  crashed.reset();  // its background ZREM fails with closed
  auto o = options(5000ms, 20ms);
  o.wait = 3000ms;
  redis::semaphore next(c, key, 1, o);
  BOOST_CHECK(co_await try_acquire(next) == dlock::error::taken);
  BOOST_CHECK(co_await member(c, key, token));
  BOOST_REQUIRE(!co_await acquire(next));
  // Not before the crashed lease's TTL (less a few ms for the clocks'
  // rates and TIME's rounding), and soon after it.
  auto after = std::chrono::steady_clock::now() - sent;
  BOOST_CHECK_MESSAGE(after >= 290ms && after < 1500ms, "taken over after " << (after / 1ms) << " ms");
  BOOST_CHECK(!co_await member(c, key, token));  // dropped by the acquire script
  auto zcard3 = co_await count(c, key);
  BOOST_CHECK_EQUAL(zcard3, 1);
  BOOST_CHECK(!co_await release(next));
}

asio::awaitable<void> auto_extension(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("sem-watchdog");
  auto o = options(200ms);
  o.auto_extend = true;
  redis::semaphore s(c, key, 1, o);
  BOOST_REQUIRE(!co_await acquire(s));
  redis::semaphore other(c, key, 1, options(200ms));
  for (int i = 0; i < 10; ++i) {  // 10 x TTL
    co_await sleep_for(200ms);
    BOOST_CHECK(co_await try_acquire(other) == dlock::error::taken);
    BOOST_CHECK(!s.loss().lost());
  }
  BOOST_CHECK(co_await member(c, key, s.token()));
  BOOST_CHECK_GE(s.extensions(), 10u);
  BOOST_CHECK(!co_await release(s));
  co_await sleep_for(300ms);  // no extension outlives the release
  auto zcard4 = co_await count(c, key);
  BOOST_CHECK_EQUAL(zcard4, 0);
  o.max_hold = 400ms;  // the cap: extended no further, then lost
  redis::semaphore capped(c, key, 1, o);
  BOOST_REQUIRE(!co_await acquire(capped));
  auto [reason] = co_await capped.loss().wait(tuple_token);
  BOOST_CHECK(reason == dlock::error::lost);
  BOOST_CHECK(co_await release(capped) == dlock::error::lost);
}

asio::awaitable<void> release_after_loss(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("sem-lost");
  redis::semaphore first(c, key, 1, options(150ms));
  BOOST_REQUIRE(!co_await acquire(first));
  auto [reason] = co_await first.loss().wait(tuple_token);  // the lease lapses, not extended
  BOOST_CHECK(reason == dlock::error::lost);
  BOOST_CHECK(!first.held());
  BOOST_CHECK(first.validity() == 0ms);
  co_await sleep_for(100ms);  // past the TTL on the server too
  redis::semaphore second(c, key, 1, options(10000ms));
  BOOST_REQUIRE(!co_await try_acquire(second));  // the lapsed lease came back
  BOOST_CHECK(co_await extend(first, 10000ms) == dlock::error::lost);
  BOOST_CHECK(co_await release(first) == dlock::error::lost);  // the loss reason
  BOOST_CHECK(co_await member(c, key, second.token()));     // untouched
  BOOST_CHECK(!co_await release(second));
  // Removed by hand while valid: extension finds it gone and tells the loss.
  redis::semaphore third(c, key, 1, options(10000ms));
  BOOST_REQUIRE(!co_await acquire(third));
  co_await must(c, "ZREM", key, third.token());
  BOOST_CHECK(co_await extend(third, 10000ms) == dlock::error::not_owned);
  BOOST_CHECK(third.loss().lost());
  BOOST_CHECK(!third.held());
  BOOST_CHECK(co_await release(third) == dlock::error::not_owned);
}

asio::awaitable<int> body_sees_lease(redis::semaphore* s) {
  co_await sleep_for(5ms);
  co_return s->held() ? 42 : -1;
}

// Destroyed while held, while waiting, or scoped by with_lock: nothing left.
asio::awaitable<void> lifetimes(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("sem-life");
  {
    redis::semaphore dropped(c, key, 1, options(10000ms));
    BOOST_REQUIRE(!co_await acquire(dropped));
  }
  co_await sleep_for(50ms);
  auto zcard5 = co_await count(c, key);  // given back in the background
  BOOST_CHECK_EQUAL(zcard5, 0);
  redis::semaphore holder(c, key, 1, options(10000ms));
  BOOST_REQUIRE(!co_await acquire(holder));
  auto waiter = std::make_unique<redis::semaphore>(c, key, 1, options(10000ms, 10ms));
  auto result = std::make_shared<std::optional<error_code>>();
  waiter->acquire([result](error_code ec) { *result = ec; });
  BOOST_CHECK(co_await try_acquire(*waiter) == dlock::error::in_progress);
  co_await sleep_for(60ms);
  BOOST_REQUIRE(!result->has_value());
  waiter.reset();
  BOOST_CHECK(!co_await release(holder));  // free for the waiter, if it still ran
  co_await sleep_for(150ms);
  BOOST_REQUIRE(result->has_value());
  BOOST_CHECK_MESSAGE(**result == asio::error::operation_aborted, (*result)->message());
  auto zcard6 = co_await count(c, key);
  BOOST_CHECK_EQUAL(zcard6, 0);
  redis::semaphore scoped(c, key, 1, options(10000ms));
  auto body = [&scoped] { return body_sees_lease(&scoped); };
  auto seen = co_await dlock::with_lock(scoped, body);
  BOOST_CHECK_EQUAL(seen, 42);
  BOOST_CHECK(!scoped.held());
  auto zcard8 = co_await count(c, key);
  BOOST_CHECK_EQUAL(zcard8, 0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_semaphore)

BOOST_AUTO_TEST_CASE(acquire_release_and_the_sorted_set) { run(&acquire_and_release); }
BOOST_AUTO_TEST_CASE(bad_arguments_are_refused_before_sending) { run(&bad_arguments); }
BOOST_AUTO_TEST_CASE(full_semaphore_is_taken_or_times_out_leaving_nothing) { run(&full_is_taken_or_timed_out); }
BOOST_AUTO_TEST_CASE(crashed_holders_lease_comes_back_after_its_ttl) { run(&crashed_holder); }
BOOST_AUTO_TEST_CASE(auto_extension_keeps_a_lease_past_ten_ttls_and_the_cap_ends_it) { run(&auto_extension); }
BOOST_AUTO_TEST_CASE(release_after_loss_gives_the_loss_reason) { run(&release_after_loss); }
BOOST_AUTO_TEST_CASE(destroyed_waiting_or_scoped_semaphores_leave_nothing) { run(&lifetimes); }

BOOST_AUTO_TEST_SUITE_END()
