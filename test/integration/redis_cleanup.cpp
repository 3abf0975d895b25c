// A failed acquire leaves no key of ours for its TTL when the connection
// comes back (safety review F12c): an acquire whose SET may have run (its
// reply lost with the connection) sends its compare-and-delete again once the
// connection is up, for the single-instance lock and for Redlock. The TTL is a
// minute, so a key that vanishes within seconds was deleted, not expired.
#include "common/redis_proxy.hpp"
#include "redis_support.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/error.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using dlock::error_code;
using dlock::test::redis_proxy;
using namespace std::chrono_literals;

namespace {

constexpr auto with_ec = asio::as_tuple(asio::deferred);
constexpr auto ttl = 60000ms;
constexpr int polls = 250;  // x 20 ms: five seconds, far below the TTL

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(with_ec);
}

redis::options options_for(const std::string& host, std::uint16_t port) {
  redis::options o;
  o.host = host;
  o.port = port;
  o.command_timeout = 5000ms;
  o.reconnect_min = 20ms;
  o.reconnect_max = 100ms;
  return o;
}

asio::awaitable<bool> key_exists(redis::connection& direct, std::string key) {
  auto [ec, value] = co_await direct.exec(redis::command("EXISTS", key), with_ec);
  BOOST_TEST_REQUIRE(!ec, "EXISTS on the direct connection: " << ec.message());
  co_return value.integer() == 1;
}

// Polls until `key` is gone from every direct connection; false after `polls` tries.
asio::awaitable<bool> gone_soon(std::vector<std::shared_ptr<redis::connection>> direct, std::string key) {
  for (int i = 0; i < polls; ++i) {
    bool any = false;
    for (auto& c : direct) {
      bool exists = co_await key_exists(*c, key);
      any = any || exists;
    }
    if (!any) co_return true;
    co_await sleep_for(20ms);
  }
  co_return false;
}

asio::awaitable<std::shared_ptr<redis::connection>> connected(asio::any_io_executor ex, std::string host,
                                                              std::uint16_t port) {
  auto c = std::make_shared<redis::connection>(ex, options_for(host, port));
  co_await c->connect();
  co_return c;
}

// The SET is forwarded, then the connection is cut before its reply: the
// key is set, the lock cannot know it, and its cleanup meets a connection
// that is down.
asio::awaitable<void> lock_set_reply_lost(asio::any_io_executor ex) {
  auto master = dlock::test::redis_masters().at(0);
  redis_proxy proxy(master.host, master.port);
  auto direct = co_await connected(ex, master.host, master.port);
  auto through = co_await connected(ex, proxy.host(), proxy.port());
  auto key = dlock::test::unique_name("dlock-test:cleanup:lock");
  redis::lock_options lo;
  lo.ttl = ttl;
  redis::lock lock(*through, key, lo);

  proxy.cut_after(20ms, 1);
  auto [ec] = co_await lock.try_acquire(with_ec);
  BOOST_TEST_REQUIRE(proxy.faults() == 1);
  BOOST_TEST((ec == redis::error::connection_lost), "try_acquire: " << ec.message());
  BOOST_TEST(!lock.held());
  std::vector<std::shared_ptr<redis::connection>> checked(1, direct);
  bool gone = co_await gone_soon(checked, key);
  BOOST_TEST(gone, "the key our lost SET made is still there 5 s later (TTL " << ttl.count() << " ms)");
  through->close();
  direct->close();
}

// The same on a majority of Redlock's masters (three of three).
asio::awaitable<void> redlock_set_reply_lost(asio::any_io_executor ex) {
  auto masters = dlock::test::redis_masters();
  BOOST_REQUIRE_GE(masters.size(), 3u);
  std::vector<std::unique_ptr<redis_proxy>> proxies;
  std::vector<std::shared_ptr<redis::connection>> direct, through;
  for (std::size_t i = 0; i < 3; ++i) {
    proxies.push_back(std::make_unique<redis_proxy>(masters[i].host, masters[i].port));
    direct.push_back(co_await connected(ex, masters[i].host, masters[i].port));
    through.push_back(co_await connected(ex, proxies[i]->host(), proxies[i]->port()));
  }
  auto key = dlock::test::unique_name("dlock-test:cleanup:redlock");
  redis::redlock_options ro;
  ro.ttl = ttl;
  ro.master_timeout = 1000ms;
  redis::redlock lock(ex, through, key, ro);

  for (auto& p : proxies) p->cut_after(20ms, 1);
  auto [ec] = co_await lock.try_acquire(with_ec);
  for (auto& p : proxies) BOOST_TEST_REQUIRE(p->faults() == 1);
  BOOST_TEST(!!ec, "try_acquire succeeded with every SET's reply lost");
  BOOST_TEST(!lock.held());
  bool gone = co_await gone_soon(direct, key);
  BOOST_TEST(gone, "a key our lost SETs made is still there 5 s later (TTL " << ttl.count() << " ms)");
  for (auto& c : through) c->close();
  for (auto& c : direct) c->close();
}

// Starts l.acquire() with a cancellation slot, emits `type` after `delay`,
// and returns how the acquire completed (polling, five seconds at most).
asio::awaitable<std::optional<error_code>> acquire_cancelled_after(redis::lock& l, std::chrono::milliseconds delay) {
  asio::cancellation_signal signal;
  auto result = std::make_shared<std::optional<error_code>>();
  l.acquire(asio::bind_cancellation_slot(signal.slot(), [result](error_code ec) { *result = ec; }));
  co_await sleep_for(delay);
  if (!*result) signal.emit(asio::cancellation_type::terminal);
  for (int i = 0; i < polls && !*result; ++i) co_await sleep_for(20ms);
  co_return *result;
}

// An acquire that waits for an earlier attempt's cleanup has sent nothing:
// a cancellation ends it with operation_aborted, and its SET is never sent.
// The cleanup is kept in flight by holding the proxy's replies.
asio::awaitable<void> cancel_while_waiting_for_cleanup(asio::any_io_executor ex) {
  auto master = dlock::test::redis_masters().at(0);
  redis_proxy proxy(master.host, master.port);
  auto direct = co_await connected(ex, master.host, master.port);
  auto through = co_await connected(ex, proxy.host(), proxy.port());
  auto key = dlock::test::unique_name("dlock-test:cleanup:waiting");
  redis::lock_options lo;
  lo.ttl = ttl;
  redis::lock lock(*through, key, lo);

  proxy.hold_replies(1000ms, 1);  // the first SET's reply, and the cleanup's after it, wait
  auto first = co_await acquire_cancelled_after(lock, 50ms);
  BOOST_TEST_REQUIRE(first.has_value());
  BOOST_TEST((*first == asio::error::operation_aborted), first->message());
  auto second = co_await acquire_cancelled_after(lock, 50ms);  // waits for the first's cleanup
  BOOST_TEST_REQUIRE(second.has_value(), "the cancelled acquire never completed");
  BOOST_TEST((*second == asio::error::operation_aborted), "the acquire waiting for a cleanup: " << second->message());
  BOOST_TEST(!lock.held());
  std::vector<std::shared_ptr<redis::connection>> checked(1, direct);
  bool gone = co_await gone_soon(checked, key);
  BOOST_TEST(gone, "a key of ours is still there 5 s later (TTL " << ttl.count() << " ms)");
  through->close();
  direct->close();
}

// An extension waiting on a server that answers late ends at once when its
// caller cancels it, and leaves the hold as it was (its compare-and-PEXPIRE
// may still run; it only ever extends our own key).
asio::awaitable<void> extend_cancelled_while_its_reply_is_held(asio::any_io_executor ex) {
  auto master = dlock::test::redis_masters().at(0);
  redis_proxy proxy(master.host, master.port);
  auto through = co_await connected(ex, proxy.host(), proxy.port());
  redis::lock_options lo;
  lo.ttl = ttl;
  redis::lock lock(*through, dlock::test::unique_name("dlock-test:cleanup:extend"), lo);
  auto [acquired] = co_await lock.acquire(with_ec);
  BOOST_TEST_REQUIRE(!acquired, "acquire: " << acquired.message());
  proxy.hold_replies(2000ms, 1);
  asio::cancellation_signal cancel;
  asio::steady_timer soon(ex, 100ms);
  soon.async_wait([&cancel](error_code) { cancel.emit(asio::cancellation_type::terminal); });
  auto [ec] = co_await lock.extend(ttl, asio::bind_cancellation_slot(cancel.slot(), asio::as_tuple(asio::use_awaitable)));
  BOOST_TEST((ec == asio::error::operation_aborted), "extend (its reply held 2 s, cancelled at 100 ms): " << ec.message());
  BOOST_TEST(lock.held());
  co_await sleep_for(2500ms);  // the held reply arrives, and is dropped
  BOOST_TEST(lock.held());
  auto [released] = co_await lock.release(with_ec);
  BOOST_TEST(!released, "release: " << released.message());
  through->close();
}

// A held lock destroyed on its own thread queues its delete at once: a
// second lock's try_acquire on the same connection, right after, finds the
// key free (the delete goes out ahead of its SET).
asio::awaitable<void> destroyed_holder_frees_the_key_before_the_next_command(asio::any_io_executor ex) {
  auto master = dlock::test::redis_masters().at(0);
  auto conn = co_await connected(ex, master.host, master.port);
  auto key = dlock::test::unique_name("dlock-test:cleanup:destroyed");
  redis::lock_options lo;
  lo.ttl = ttl;
  {
    redis::lock first(*conn, key, lo);
    auto [ec] = co_await first.acquire(with_ec);
    BOOST_TEST_REQUIRE(!ec, "acquire: " << ec.message());
  }
  redis::lock second(*conn, key, lo);
  auto [ec] = co_await second.try_acquire(with_ec);
  BOOST_TEST(!ec, "try_acquire after the holder was destroyed: " << ec.message());
  auto [released] = co_await second.release(with_ec);
  BOOST_TEST(!released);
  conn->close();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_cleanup)

BOOST_AUTO_TEST_CASE(lock_deletes_the_key_of_a_lost_set_once_reconnected) { redis_test::run(&lock_set_reply_lost); }
BOOST_AUTO_TEST_CASE(lock_acquire_waiting_for_a_cleanup_is_cancellable) {
  redis_test::run(&cancel_while_waiting_for_cleanup);
}
BOOST_AUTO_TEST_CASE(redlock_deletes_the_keys_of_lost_sets_once_reconnected) {
  redis_test::run(&redlock_set_reply_lost);
}

BOOST_AUTO_TEST_SUITE_END()
BOOST_AUTO_TEST_CASE(an_extend_cancelled_while_its_reply_is_late_ends_and_keeps_the_hold) {
  redis_test::run(&extend_cancelled_while_its_reply_is_held);
}
BOOST_AUTO_TEST_CASE(a_holder_destroyed_on_its_thread_frees_the_key_before_the_next_command) {
  redis_test::run(&destroyed_holder_frees_the_key_before_the_next_command);
}
