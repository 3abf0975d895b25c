// dlock::with_lock over the Redis locks (the ZooKeeper mutex is covered in
// zk_lock.cpp): one scoped helper for every lock kind.
#include <dlock/redis/connection.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/with_lock.hpp>

#include "integration/redlock_support.hpp"

#include <boost/test/unit_test.hpp>

#include <stdexcept>

using namespace redlock_test;

namespace {

// The body: a named coroutine (g++ 12 rule), reporting whether the lock was held.
template <class Lock>
asio::awaitable<int> body_sees_lock_held(Lock* lock) {
  co_await sleep_for(10ms);
  co_return lock->held() ? 42 : -1;
}

template <class Lock>
asio::awaitable<void> body_throws(Lock*) {
  co_await sleep_for(1ms);
  throw std::runtime_error("body failed");
}

template <class Lock>
asio::awaitable<void> scoped_use(Lock& lock) {
  auto returning = [&lock] { return body_sees_lock_held(&lock); };
  int result = co_await dlock::with_lock(lock, returning);
  BOOST_TEST(result == 42, "the body ran while the lock was held");
  BOOST_TEST(!lock.held(), "released after the body");

  auto throwing = [&lock] { return body_throws(&lock); };
  bool threw = false;
  try {
    co_await dlock::with_lock(lock, throwing);
  } catch (const std::runtime_error&) {
    threw = true;
  }
  BOOST_TEST(threw, "the body's exception reaches the caller");
  BOOST_TEST(!lock.held(), "released after the body threw");

  // The lock is free again: another acquire succeeds at once.
  auto [ec] = co_await lock.try_acquire(tuple_token);
  BOOST_TEST(!ec);
  co_await lock.release(tuple_token);
}

asio::awaitable<void> single_instance() {
  auto ex = co_await asio::this_coro::executor;
  auto masters = co_await connect_masters(ex, 1);
  redis::lock lock(*masters[0], dlock::test::unique_name("with-lock"), {.ttl = 5s});
  co_await scoped_use(lock);
  close_all(masters);
}

asio::awaitable<void> redlock_over_five() {
  auto ex = co_await asio::this_coro::executor;
  auto masters = co_await connect_masters(ex, 5);
  redis::redlock lock(ex, masters, dlock::test::unique_name("with-redlock"), {});
  co_await scoped_use(lock);
  close_all(masters);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(with_lock)

BOOST_AUTO_TEST_CASE(over_the_single_instance_redis_lock) { run(single_instance()); }

BOOST_AUTO_TEST_CASE(over_redlock) { run(redlock_over_five()); }

BOOST_AUTO_TEST_SUITE_END()
