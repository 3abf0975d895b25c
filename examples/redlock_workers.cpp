// A pool of workers sharing one job slot through Redlock over the five
// masters of DLOCK_REDIS_MASTERS.
//
// Each job runs under `dlock::with_lock`: the lock is acquired, the job runs,
// the lock is released on every path. The TTL is short (600 ms) and the jobs
// longer (900 ms): `auto_extend` keeps the lock alive while a job runs. One
// worker's job overruns the cap `max_hold`: extension stops, the lock runs out,
// and with_lock cancels that job instead of letting it go on unprotected.
// Exits 0 when three jobs completed, the overrunning one was cancelled, and
// no two jobs ever ran at once.
#include "example_support.hpp"

#include <dlock/redis/connection.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/with_lock.hpp>

#include <boost/system/system_error.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using namespace std::chrono_literals;
using masters_t = std::vector<std::shared_ptr<redis::connection>>;

struct pool {
  masters_t masters;
  std::string key = example::unique("dlock-example-batch");
  int running = 0;  // jobs inside the lock right now: never more than one
  int completed = 0;
  int cancelled = 0;
};

// Counts a job in and out of the critical section, even when it is cancelled.
struct inside {
  pool* p;
  explicit inside(pool* owner) : p(owner) { example::check(++p->running == 1, "one job at a time"); }
  ~inside() { --p->running; }
  inside(const inside&) = delete;
  inside& operator=(const inside&) = delete;
};

// The job: a named coroutine with by-value parameters (see with_lock.hpp).
// Sleeps stand for work; each one is a point where a loss cancels the job.
asio::awaitable<void> job(pool* p, redis::redlock* lock, std::string worker, std::chrono::milliseconds length) {
  inside counted(p);
  std::printf("%s holds %s (validity %lld ms), working %lld ms\n", worker.c_str(), p->key.c_str(),
              static_cast<long long>(lock->validity().count()), static_cast<long long>(length.count()));
  for (auto done = 0ms; done < length; done += 100ms) co_await example::sleep_for(100ms);
  ++p->completed;
  std::printf("%s done, still %lld ms of validity\n", worker.c_str(),
              static_cast<long long>(lock->validity().count()));
}

asio::awaitable<void> worker(pool* p, std::string name, std::chrono::milliseconds length,
                             std::chrono::milliseconds max_hold) {
  redis::redlock_options options;
  options.ttl = 600ms;
  options.auto_extend = true;  // extended every ttl/3 while held
  options.max_hold = max_hold;  // 0: no cap
  options.retry_count = -1;    // wait for the others' jobs...
  options.wait_limit = 20s;    // ...but not forever
  options.retry_delay = 50ms;
  options.retry_jitter = 25ms;
  redis::redlock lock(co_await asio::this_coro::executor, p->masters, p->key, options);

  auto body = [p, &lock, name, length] { return job(p, &lock, name, length); };
  try {
    co_await dlock::with_lock(lock, body);
  } catch (const boost::system::system_error& e) {
    // with_lock throws the loss reason once it cancelled the body.
    if (!lock.loss().lost()) throw;
    ++p->cancelled;
    std::printf("%s lost the lock (%s): its job was cancelled\n", name.c_str(), e.code().message().c_str());
  }
}

asio::awaitable<void> example_main() {
  pool p;
  p.masters = co_await example::connect_masters(5);
  std::vector<asio::awaitable<void>> workers;
  for (int i = 1; i <= 3; ++i) workers.push_back(worker(&p, "worker-" + std::to_string(i), 900ms, 0ms));
  workers.push_back(worker(&p, "overrunner", 3000ms, 600ms));  // extension stops after 600 ms
  co_await example::all_of(std::move(workers));
  for (auto& master : p.masters) master->close();

  example::check(p.completed == 3, "three jobs completed");
  example::check(p.cancelled == 1, "the overrunning job was cancelled");
  std::printf("3 jobs completed, 1 cancelled on lock loss, never two at once\n");
}

int main() { return example::run("redlock_workers", example_main); }
