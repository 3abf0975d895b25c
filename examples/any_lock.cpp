// One piece of code for every kind of lock: `guarded_update` is written once,
// against the `dlock::lockable` concept, and runs unchanged over a ZooKeeper
// mutex, a ZooKeeper simple lock, the writer of a ZooKeeper read/write lock,
// a single-Redis lock and a Redlock over three masters.
//
// For each lock it: takes the lock; checks that a second contender's
// try_acquire is refused (`taken`) and that its bounded wait runs out
// (`timed_out`); does the critical section through `dlock::with_lock`; and
// checks that a second release is a harmless no-op. Uses DLOCK_ZK_HOSTS and
// DLOCK_REDIS_MASTERS; exits 0 when every lock behaved the same.
#include "example_support.hpp"

#include <dlock/error.hpp>
#include <dlock/lockable.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/with_lock.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/shared_mutex.hpp>
#include <dlock/zk/simple_lock.hpp>

#include <cinttypes>
#include <cstdio>
#include <string>

namespace asio = boost::asio;
namespace zk = dlock::zk;
namespace redis = dlock::redis;
using namespace std::chrono_literals;

constexpr auto with_ec = asio::as_tuple(asio::deferred);

// The critical section: a named coroutine with by-value parameters (g++ 12).
asio::awaitable<int> update_counter(int* counter) {
  co_await example::sleep_for(10ms);  // stands for the work the lock protects
  co_return ++*counter;
}

/// Written once for every dlock lock. `rival` is a second lock on the same name.
template <dlock::lockable Lock>
asio::awaitable<void> guarded_update(Lock& lock, Lock& rival, int* counter) {
  std::string name(lock.name());
  co_await lock.acquire();
  example::check(lock.held(), name + ": held after acquire");
  if constexpr (dlock::fenced_lockable<Lock>)
    std::printf("%s: held, fencing token %" PRId64 "\n", name.c_str(), lock.fencing_token());
  else
    std::printf("%s: held (no fencing token on this backend)\n", name.c_str());

  auto [busy] = co_await rival.try_acquire(with_ec);
  example::check(busy == dlock::error::taken, name + ": try_acquire while held gives taken, not " + busy.message());
  auto [waited] = co_await rival.acquire_for(200ms, with_ec);
  example::check(waited == dlock::error::timed_out, name + ": a wait that runs out gives timed_out, not " +
                                                         waited.message());
  co_await lock.release();

  auto body = [counter] { return update_counter(counter); };
  int value = co_await dlock::with_lock(lock, body);  // acquire, body, release on every path
  std::printf("%s: counter is %d\n", name.c_str(), value);

  auto [again] = co_await lock.release(with_ec);
  example::check(!again, name + ": a second release is a no-op, not " + again.message());
  example::check(!lock.held(), name + ": not held after release");
}

asio::awaitable<void> every_lock() {
  int counter = 0;
  auto executor = co_await asio::this_coro::executor;

  zk::client client(executor, example::zk_options());
  co_await client.connect();
  std::string path = "/dlock-example/" + example::unique("any-lock");
  {
    zk::mutex a(client, path + "-mutex"), b(client, path + "-mutex");
    co_await guarded_update(a, b, &counter);
  }
  {
    zk::simple_lock a(client, path + "-simple"), b(client, path + "-simple");
    co_await guarded_update(a, b, &counter);
  }
  {
    zk::shared_mutex a(client, path + "-rw"), b(client, path + "-rw");
    co_await guarded_update(a.writer(), b.writer(), &counter);
  }
  co_await client.close();

  auto masters = co_await example::connect_masters(3);
  std::string key = example::unique("dlock-example:any-lock");
  {
    redis::lock a(*masters.front(), key + ":single", {.fencing = true}), b(*masters.front(), key + ":single", {.fencing = true});
    co_await guarded_update(a, b, &counter);
  }
  {
    redis::redlock_options options;
    options.fencing = true;
    options.retry_delay = 50ms;
    options.retry_jitter = 20ms;
    redis::redlock a(executor, masters, key + ":redlock", options), b(executor, masters, key + ":redlock", options);
    co_await guarded_update(a, b, &counter);
  }
  for (auto& master : masters) master->close();
  example::check(counter == 5, "five critical sections ran");
  std::printf("every lock kept the same contract\n");
}

int main() { return example::run("any_lock", &every_lock); }
