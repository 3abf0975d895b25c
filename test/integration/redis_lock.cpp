// dlock::redis::lock against a real redis-server: ownership, mutual
// exclusion, expiry, extension, auto-extension, bad input.
#include "redis_support.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/lock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using dlock::error_code;
using namespace std::chrono_literals;
using redis_test::master_options;
using redis_test::run;

namespace {

constexpr auto tuple_token = asio::as_tuple(asio::deferred);

template <class... Args>
asio::awaitable<redis::reply> must(redis::connection& c, Args... args) {
  auto op = c.exec(redis::command(args...), tuple_token);
  auto [ec, r] = co_await std::move(op);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  co_return r;
}

asio::awaitable<error_code> acquire(redis::lock& l) {
  auto [ec] = co_await l.acquire(tuple_token);
  co_return ec;
}
asio::awaitable<error_code> try_acquire(redis::lock& l) {
  auto [ec] = co_await l.try_acquire(tuple_token);
  co_return ec;
}
asio::awaitable<error_code> release(redis::lock& l) {
  auto [ec] = co_await l.release(tuple_token);
  co_return ec;
}
asio::awaitable<error_code> extend(redis::lock& l, std::chrono::milliseconds ttl) {
  auto [ec] = co_await l.extend(ttl, tuple_token);
  co_return ec;
}
asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(tuple_token);
}

redis::lock_options with_ttl(std::chrono::milliseconds ttl) {
  redis::lock_options o;
  o.ttl = ttl;
  return o;
}

asio::awaitable<void> acquire_and_release(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("lock");
  redis::lock l(c, key, with_ttl(5000ms));
  BOOST_CHECK(!l.held());
  BOOST_CHECK(l.validity() == 0ms);
  BOOST_REQUIRE(!co_await acquire(l));
  BOOST_CHECK(l.held());
  BOOST_CHECK(l.validity() > 0ms);
  BOOST_CHECK(l.validity() <= 5000ms);
  BOOST_CHECK_EQUAL(l.token().size(), 32u);  // 128 bits, hex
  auto value = co_await must(c, "GET", key);
  BOOST_CHECK_EQUAL(value.string(), l.token());  // the plain key holds the token
  auto pttl = co_await must(c, "PTTL", key);
  BOOST_CHECK(pttl.integer() > 4000 && pttl.integer() <= 5000);
  BOOST_CHECK(co_await acquire(l) == dlock::error::already_held);
  auto first_token = l.token();
  BOOST_CHECK(!co_await release(l));
  BOOST_CHECK(!l.held());
  value = co_await must(c, "GET", key);
  BOOST_CHECK(value.is_nil());
  BOOST_CHECK(!co_await release(l));  // the contract: a second release is a no-op that succeeds
  BOOST_CHECK(co_await extend(l, 1000ms) == dlock::error::not_held);
  BOOST_REQUIRE(!co_await try_acquire(l));
  BOOST_CHECK_NE(l.token(), first_token);  // never reused
  BOOST_CHECK(!co_await release(l));
}

asio::awaitable<void> held_key_is_taken(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("taken");
  redis::lock holder(c, key, with_ttl(10000ms));
  BOOST_REQUIRE(!co_await acquire(holder));
  redis::lock other(c, key, with_ttl(10000ms));
  BOOST_CHECK(co_await try_acquire(other) == dlock::error::taken);  // one round trip
  auto waiting = with_ttl(10000ms);
  waiting.wait = 150ms;
  waiting.retry_delay = 20ms;
  waiting.retry_jitter = 10ms;
  redis::lock patient(c, key, waiting);
  // The contract: a wait that runs out is timed_out on every lock (was taken).
  BOOST_CHECK(co_await acquire(patient) == dlock::error::timed_out);
  BOOST_CHECK(!patient.held());
  auto value = co_await must(c, "GET", key);
  BOOST_CHECK_EQUAL(value.string(), holder.token());
  BOOST_CHECK(!co_await release(holder));
  BOOST_CHECK(!co_await try_acquire(other));
  BOOST_CHECK(!co_await release(other));
}

asio::awaitable<void> bad_input(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto before = c.stats().commands;
  redis::lock no_key(c, "", with_ttl(1000ms));
  BOOST_CHECK(co_await acquire(no_key) == dlock::error::invalid_argument);
  BOOST_CHECK(co_await try_acquire(no_key) == dlock::error::invalid_argument);
  redis::lock zero_ttl(c, "k", with_ttl(0ms));
  BOOST_CHECK(co_await acquire(zero_ttl) == dlock::error::invalid_argument);
  redis::lock negative_ttl(c, "k", with_ttl(-5ms));
  BOOST_CHECK(co_await try_acquire(negative_ttl) == dlock::error::invalid_argument);
  BOOST_CHECK_EQUAL(c.stats().commands, before);  // nothing was sent
  redis::lock fine(c, dlock::test::unique_name("fine"), with_ttl(1000ms));
  BOOST_REQUIRE(!co_await acquire(fine));
  BOOST_CHECK(co_await extend(fine, 0ms) == dlock::error::invalid_argument);
  BOOST_CHECK(!co_await release(fine));
}

// 3 connections x 32 coroutines x 50 acquisitions; a section that overlaps
// another is seen by the shared counter, and by the server's value.
struct exclusion {
  int inside = 0;
  int overlaps = 0;
  int not_ours = 0;
  int errors = 0;
  int entries = 0;
  int finished = 0;
};

asio::awaitable<void> contender(redis::connection& c, std::string key, std::shared_ptr<exclusion> shared,
                                asio::steady_timer& all_done, int total) {
  auto opts = with_ttl(10000ms);
  opts.wait = 600000ms;
  opts.retry_delay = 3ms;
  opts.retry_jitter = 2ms;
  redis::lock l(c, key, opts);
  for (int i = 0; i < 50; ++i) {
    if (auto ec = co_await acquire(l)) {
      ++shared->errors;
      BOOST_TEST_MESSAGE("acquire failed: " << ec.message());
      continue;
    }
    if (shared->inside++ != 0) ++shared->overlaps;
    ++shared->entries;
    auto value = co_await must(c, "GET", key);  // a section that spans a round trip
    if (value.string() != l.token()) ++shared->not_ours;
    --shared->inside;
    if (auto ec = co_await release(l)) ++shared->errors;
  }
  if (++shared->finished == total) all_done.cancel();
}

asio::awaitable<void> mutual_exclusion(asio::any_io_executor ex) {
  std::vector<std::unique_ptr<redis::connection>> connections;
  for (int i = 0; i < 3; ++i) {
    connections.push_back(std::make_unique<redis::connection>(ex, master_options()));
    co_await connections.back()->connect();
  }
  auto key = dlock::test::unique_name("mutex");
  auto shared = std::make_shared<exclusion>();
  asio::steady_timer all_done(ex, asio::steady_timer::time_point::max());
  constexpr int total = 3 * 32;
  for (int i = 0; i < total; ++i)
    asio::co_spawn(ex, contender(*connections[std::size_t(i % 3)], key, shared, all_done, total),
                   [](std::exception_ptr e) {
                     if (e) std::rethrow_exception(e);
                   });
  co_await all_done.async_wait(tuple_token);
  BOOST_CHECK_EQUAL(shared->entries, total * 50);
  BOOST_CHECK_EQUAL(shared->overlaps, 0);
  BOOST_CHECK_EQUAL(shared->not_ours, 0);
  BOOST_CHECK_EQUAL(shared->errors, 0);
}

asio::awaitable<void> expired_holder_cannot_delete(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("expired");
  redis::lock first(c, key, with_ttl(100ms));
  BOOST_REQUIRE(!co_await acquire(first));
  // No auto-extension: the holder is told when its validity runs out.
  auto [reason] = co_await first.loss().wait(tuple_token);
  BOOST_CHECK(reason == dlock::error::lost);
  BOOST_CHECK(!first.held());  // the contract: not held from the moment the loss is known
  BOOST_CHECK(first.validity() == 0ms);
  co_await sleep_for(150ms);  // first's TTL passes on the server too
  redis::lock second(c, key, with_ttl(10000ms));
  BOOST_REQUIRE(!co_await try_acquire(second));
  BOOST_CHECK(co_await extend(first, 10000ms) == dlock::error::lost);  // lost is lost: acquire again
  // The contract: a release after a loss tells the loss reason (was not_owned).
  BOOST_CHECK(co_await release(first) == dlock::error::lost);
  auto value = co_await must(c, "GET", key);
  BOOST_CHECK_EQUAL(value.string(), second.token());  // second's lock survived both
  BOOST_CHECK(!co_await extend(second, 20000ms));
  auto pttl = co_await must(c, "PTTL", key);
  BOOST_CHECK_GT(pttl.integer(), 10000);
  BOOST_CHECK(second.validity() > 10000ms);
  BOOST_CHECK(!co_await release(second));

  // Taken over on the server while its validity still runs: the server's
  // compare refuses the extension and the release, and the holder is told.
  redis::lock third(c, key, with_ttl(10000ms));
  BOOST_REQUIRE(!co_await acquire(third));
  co_await must(c, "SET", key, "someone-else", "PX", "10000");
  BOOST_CHECK(co_await extend(third, 10000ms) == dlock::error::not_owned);  // extend fails for a non-owner
  BOOST_CHECK(third.loss().lost());
  BOOST_CHECK(!third.held());
  BOOST_CHECK(co_await release(third) == dlock::error::not_owned);  // the loss reason
  value = co_await must(c, "GET", key);
  BOOST_CHECK_EQUAL(value.string(), "someone-else");
}

asio::awaitable<void> auto_extension_holds(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("watchdog");
  auto opts = with_ttl(200ms);
  opts.auto_extend = true;
  redis::lock l(c, key, opts);
  BOOST_REQUIRE(!co_await acquire(l));
  redis::lock other(c, key, with_ttl(200ms));
  for (int i = 0; i < 10; ++i) {  // 10 x TTL
    co_await sleep_for(200ms);
    BOOST_CHECK(co_await try_acquire(other) == dlock::error::taken);
    BOOST_CHECK(!l.loss().lost());
  }
  auto value = co_await must(c, "GET", key);
  BOOST_CHECK_EQUAL(value.string(), l.token());
  BOOST_CHECK_GE(l.extensions(), 10u);
  BOOST_CHECK(l.validity() > 0ms);
  BOOST_CHECK(!co_await release(l));
  value = co_await must(c, "GET", key);
  BOOST_CHECK(value.is_nil());
  // No renewal outlives release: the key stays gone.
  co_await sleep_for(300ms);
  value = co_await must(c, "GET", key);
  BOOST_CHECK(value.is_nil());
}

asio::awaitable<void> capped_hold(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("capped");
  auto opts = with_ttl(200ms);
  opts.auto_extend = true;
  opts.max_hold = 400ms;
  redis::lock l(c, key, opts);
  BOOST_REQUIRE(!co_await acquire(l));
  auto [reason] = co_await l.loss().wait(tuple_token);
  BOOST_CHECK(reason == dlock::error::lost);
  BOOST_CHECK(l.validity() == 0ms);
  co_await sleep_for(50ms);
  auto value = co_await must(c, "GET", key);
  BOOST_CHECK(value.is_nil());  // expired on the server by then
  BOOST_CHECK(co_await release(l) == dlock::error::lost);  // the contract: the loss reason (was not_owned)
}

asio::awaitable<void> cancelled_acquire_leaves_nothing(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("cancel");
  redis::lock holder(c, key, with_ttl(10000ms));
  BOOST_REQUIRE(!co_await acquire(holder));
  redis::lock waiter(c, key, with_ttl(10000ms));
  asio::cancellation_signal signal;
  auto result = std::make_shared<std::optional<error_code>>();
  waiter.acquire(asio::bind_cancellation_slot(signal.slot(), [result](error_code ec) { *result = ec; }));
  co_await sleep_for(120ms);
  signal.emit(asio::cancellation_type::terminal);
  co_await sleep_for(50ms);
  BOOST_REQUIRE(result->has_value());
  BOOST_CHECK(**result == asio::error::operation_aborted);
  BOOST_CHECK(!waiter.held());
  BOOST_CHECK(!co_await release(holder));
  co_await sleep_for(50ms);
  auto value = co_await must(c, "GET", key);
  BOOST_CHECK(value.is_nil());
  // A lock destroyed while held is released in the background.
  {
    redis::lock dropped(c, key, with_ttl(10000ms));
    BOOST_REQUIRE(!co_await acquire(dropped));
  }
  co_await sleep_for(50ms);
  value = co_await must(c, "GET", key);
  BOOST_CHECK(value.is_nil());
}


// F12h: options the lock cannot work with are refused at once, nothing sent.
asio::awaitable<void> bad_options(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto before = c.stats().commands;
  auto key = dlock::test::unique_name("bad-options");
  std::vector<std::pair<std::string, redis::lock_options>> cases;
  auto o = with_ttl(1000ms);
  o.retry_jitter = -1ms;  // uniform_int_distribution(1, -1) is undefined
  cases.emplace_back("negative retry_jitter", o);
  o = with_ttl(1000ms);
  o.retry_delay = -1ms;
  cases.emplace_back("negative retry_delay", o);
  o = with_ttl(1000ms);
  o.auto_extend = true;
  o.extend_fraction = 0;  // extending in a tight loop
  cases.emplace_back("extend_fraction 0", o);
  o.extend_fraction = -0.5;
  cases.emplace_back("negative extend_fraction", o);
  o.extend_fraction = 1.0;  // extends when the key expires
  cases.emplace_back("extend_fraction 1", o);
  o = with_ttl(1000ms);
  o.drift_factor = 1.5;
  cases.emplace_back("drift_factor 1.5", o);
  o = with_ttl(1000ms);
  o.max_hold = -1ms;
  cases.emplace_back("negative max_hold", o);
  o = with_ttl(1000ms);
  o.replicas = -1;
  cases.emplace_back("negative replicas", o);
  o.replicas = 1;
  o.replica_timeout = 0ms;  // WAIT 0 waits for ever
  cases.emplace_back("replica_timeout 0", o);
  for (auto& [what, opts] : cases) {
    redis::lock l(c, key, opts);
    BOOST_CHECK_MESSAGE(co_await acquire(l) == dlock::error::invalid_argument, what);
    BOOST_CHECK_MESSAGE(co_await try_acquire(l) == dlock::error::invalid_argument, what);
    BOOST_CHECK(!l.held());
  }
  BOOST_CHECK_EQUAL(c.stats().commands, before);  // nothing was sent
}

// Replica acknowledgement asked of a master without replicas: WAIT answers
// 0, the acquire fails with not_replicated and leaves no key behind.
asio::awaitable<void> unreplicated_acquire(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("unreplicated");
  auto o = with_ttl(10'000ms);
  o.replicas = 1;
  o.replica_timeout = 50ms;
  for (bool fencing : {false, true}) {
    o.fencing = fencing;
    redis::lock l(c, key, o);
    BOOST_CHECK(co_await try_acquire(l) == dlock::error::not_replicated);
    BOOST_CHECK(!l.held());
    co_await sleep_for(50ms);  // the background delete
    BOOST_CHECK_EQUAL((co_await must(c, "EXISTS", key)).integer(), 0);
  }
}

// F12h: a connection that would reconnect in a tight loop is refused.
asio::awaitable<void> zero_reconnect_delay(asio::any_io_executor ex) {
  auto o = master_options();
  o.reconnect_min = 0ms;
  redis::connection c(ex, o);
  auto [ec] = co_await c.connect(tuple_token);
  BOOST_CHECK_MESSAGE(ec == dlock::error::invalid_argument, ec.message());
  auto o2 = master_options();
  o2.reconnect_max = 10ms;
  o2.reconnect_min = 20ms;  // max below min
  redis::connection c2(ex, o2);
  auto [ec2] = co_await c2.connect(tuple_token);
  BOOST_CHECK_MESSAGE(ec2 == dlock::error::invalid_argument, ec2.message());
}

// F12f: the connection destroyed while an acquire retries: the acquire ends
// with an error (ASan reports a use after free if the lock still uses it).
asio::awaitable<void> connection_destroyed_while_acquiring(asio::any_io_executor ex) {
  redis::connection other(ex, master_options());
  co_await other.connect();
  auto key = dlock::test::unique_name("conn-gone");
  redis::lock holder(other, key, with_ttl(10000ms));
  BOOST_REQUIRE(!co_await acquire(holder));
  auto c = std::make_unique<redis::connection>(ex, master_options());
  co_await c->connect();
  auto opts = with_ttl(10000ms);
  opts.retry_delay = 20ms;
  opts.retry_jitter = 5ms;
  auto waiter = std::make_unique<redis::lock>(*c, key, opts);
  auto result = std::make_shared<std::optional<error_code>>();
  waiter->acquire([result](error_code ec) { *result = ec; });
  co_await sleep_for(100ms);  // a few attempts: it is retrying now
  BOOST_REQUIRE(!result->has_value());
  c.reset();
  for (int i = 0; i < 100 && !result->has_value(); ++i) co_await sleep_for(20ms);
  BOOST_REQUIRE(result->has_value());
  BOOST_CHECK_MESSAGE(**result == dlock::error::closed, (*result)->message());
  BOOST_CHECK(!waiter->held());
  waiter.reset();
  BOOST_CHECK(!co_await release(holder));
}

// F12f: destroying a lock cancels its acquire: it never takes the key later.
asio::awaitable<void> lock_destroyed_while_acquiring(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("lock-gone");
  redis::lock holder(c, key, with_ttl(10000ms));
  BOOST_REQUIRE(!co_await acquire(holder));
  auto opts = with_ttl(10000ms);
  opts.retry_delay = 10ms;
  opts.retry_jitter = 2ms;
  auto waiter = std::make_unique<redis::lock>(c, key, opts);
  auto result = std::make_shared<std::optional<error_code>>();
  waiter->acquire([result](error_code ec) { *result = ec; });
  co_await sleep_for(60ms);
  BOOST_REQUIRE(!result->has_value());
  waiter.reset();
  BOOST_CHECK(!co_await release(holder));  // the key is free for the waiter, if it still ran
  co_await sleep_for(150ms);
  BOOST_REQUIRE(result->has_value());
  BOOST_CHECK_MESSAGE(**result == asio::error::operation_aborted, (*result)->message());
  auto value = co_await must(c, "GET", key);
  BOOST_CHECK_MESSAGE(value.is_nil(), "the destroyed lock took the key: " + std::string(value.string()));
}

// F3: one operation at a time. A release not awaited, then an acquire: the
// acquire is refused with in_progress (it would otherwise race the release,
// whose delete and loss disarm could hit the new hold); once the release is
// done the next acquire holds the key with its own token and loss signal.
asio::awaitable<void> release_then_acquire(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("one-at-a-time");
  auto opts = with_ttl(300ms);
  opts.auto_extend = true;
  redis::lock l(c, key, opts);
  for (int round = 0; round < 5; ++round) {
    BOOST_REQUIRE(!co_await acquire(l));
    co_await sleep_for(std::chrono::milliseconds(100 + 3 * round));  // around an extension
    auto released = std::make_shared<std::optional<error_code>>();
    l.release([released](error_code ec) { *released = ec; });
    auto second = co_await acquire(l);
    if (second) {
      BOOST_CHECK_MESSAGE(second == dlock::error::in_progress, second.message());
      for (int i = 0; i < 100 && !released->has_value(); ++i) co_await sleep_for(5ms);
      BOOST_REQUIRE(released->has_value());
      BOOST_CHECK(!**released);
      BOOST_REQUIRE(!co_await acquire(l));
    }
    co_await sleep_for(20ms);
    auto value = co_await must(c, "GET", key);
    BOOST_REQUIRE_MESSAGE(value.is_bulk() && value.string() == l.token(),
                          "round " << round << ": the key does not hold our token");
    BOOST_CHECK(!l.loss().lost());
    BOOST_REQUIRE(!co_await release(l));
  }
  // A second acquire while the first is still running is refused too.
  redis::lock holder(c, key, with_ttl(10000ms));
  BOOST_REQUIRE(!co_await acquire(holder));
  auto first = std::make_shared<std::optional<error_code>>();
  l.acquire([first](error_code ec) { *first = ec; });
  BOOST_CHECK(co_await try_acquire(l) == dlock::error::in_progress);
  BOOST_REQUIRE(!co_await release(holder));
  for (int i = 0; i < 200 && !first->has_value(); ++i) co_await sleep_for(10ms);
  BOOST_REQUIRE(first->has_value());
  BOOST_CHECK(!**first);
  BOOST_CHECK(!co_await release(l));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_lock)

BOOST_AUTO_TEST_CASE(acquire_release_token_and_validity) { run(&acquire_and_release); }
BOOST_AUTO_TEST_CASE(try_acquire_on_held_key_is_taken) { run(&held_key_is_taken); }
BOOST_AUTO_TEST_CASE(invalid_key_or_ttl_is_refused_before_sending) { run(&bad_input); }
BOOST_AUTO_TEST_CASE(an_acquire_no_replica_acknowledged_fails_and_leaves_no_key) { run(&unreplicated_acquire); }
BOOST_AUTO_TEST_CASE(mutual_exclusion_3_connections_32_coroutines_50_times) { run(&mutual_exclusion); }
BOOST_AUTO_TEST_CASE(expired_holder_cannot_delete_or_extend_the_next_owners_lock) {
  run(&expired_holder_cannot_delete);
}
BOOST_AUTO_TEST_CASE(auto_extension_holds_for_ten_ttls) { run(&auto_extension_holds); }
BOOST_AUTO_TEST_CASE(hold_cap_ends_in_loss) { run(&capped_hold); }
BOOST_AUTO_TEST_CASE(cancelled_acquire_and_dropped_lock_leave_nothing) { run(&cancelled_acquire_leaves_nothing); }

BOOST_AUTO_TEST_CASE(bad_lock_options_are_refused_before_sending) { run(&bad_options); }
BOOST_AUTO_TEST_CASE(zero_reconnect_delay_is_refused) { run(&zero_reconnect_delay); }
BOOST_AUTO_TEST_CASE(connection_destroyed_while_acquiring_gives_closed) { run(&connection_destroyed_while_acquiring); }
BOOST_AUTO_TEST_CASE(lock_destroyed_while_acquiring_never_takes_the_key) { run(&lock_destroyed_while_acquiring); }
BOOST_AUTO_TEST_CASE(release_not_awaited_then_acquire_one_operation_at_a_time) { run(&release_then_acquire); }

BOOST_AUTO_TEST_SUITE_END()
