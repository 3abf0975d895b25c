// dlock::redis::lock and redis-py's redis.lock.Lock (Debian python3-redis)
// share one key: no overlap, and neither releases the other's lock.
#include "redis_support.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/lock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using dlock::error_code;
using namespace std::chrono_literals;
using redis_test::master_options;
using redis_test::run;

namespace {

constexpr auto tuple_token = asio::as_tuple(asio::deferred);

const char* python_source = R"PY(
import sys, time, redis
from redis.exceptions import LockNotOwnedError
host, port, key, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
r = redis.Redis(host=host, port=port)
if mode == "probe":          # someone else holds key
    l = r.lock(key, timeout=10)
    print("acquired" if l.acquire(blocking=False) else "busy")
    l.local.token = b"not-the-owner-token"
    try:
        l.release()
        print("released")
    except LockNotOwnedError:
        print("not-owned")
elif mode == "hold":         # hold key for a while
    l = r.lock(key, timeout=10)
    l.acquire()
    print("held", l.local.token.decode(), flush=True)
    time.sleep(float(sys.argv[5]))
    l.release()
    print("released", flush=True)
elif mode == "contend":      # N sections guarded by key; count overlaps
    counter, n, overlaps = sys.argv[5], int(sys.argv[6]), 0
    for i in range(n):
        l = r.lock(key, timeout=5, sleep=0.002, blocking_timeout=120)
        if not l.acquire():
            print("gave-up"); sys.exit(1)
        if r.incr(counter) != 1: overlaps += 1
        time.sleep(0.002)
        r.decr(counter)
        l.release()
    print("overlaps", overlaps)
)PY";

// Written once per run, removed at exit.
struct script_file {
  std::string path = "/tmp/dlock-redis-interop-" + std::to_string(::getpid()) + ".py";
  script_file() { std::ofstream(path) << python_source; }
  ~script_file() { std::remove(path.c_str()); }
};

std::string script_path() {
  static script_file file;
  return file.path;
}

// Runs the python script on a thread; `first_line` is set when it prints.
struct python_run {
  std::atomic<bool> done{false};
  std::atomic<bool> first_line{false};
  std::string output;  // read after `done`
  std::thread thread;

  explicit python_run(std::string args) {
    thread = std::thread([this, args] {
      auto o = master_options();
      std::string cmd = "/usr/bin/python3 " + script_path() + " " + o.host + " " + std::to_string(o.port) + " " + args;
      FILE* pipe = ::popen(cmd.c_str(), "r");
      std::string text;
      if (pipe) {
        char line[512];
        while (std::fgets(line, sizeof line, pipe)) {
          text += line;
          first_line = true;
        }
        ::pclose(pipe);
      }
      output = text;
      done = true;
    });
  }
  ~python_run() {
    if (thread.joinable()) thread.join();
  }
};

asio::awaitable<void> wait_until(const std::atomic<bool>& flag) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  while (!flag) {
    t.expires_after(5ms);
    co_await t.async_wait(tuple_token);
  }
}

template <class... Args>
asio::awaitable<redis::reply> must(redis::connection& c, Args... args) {
  auto op = c.exec(redis::command(args...), tuple_token);
  auto [ec, r] = co_await std::move(op);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  co_return r;
}

asio::awaitable<void> python_cannot_take_or_release_ours(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("interop-ours");
  redis::lock l(c, key);
  auto [ec] = co_await l.acquire(tuple_token);
  BOOST_REQUIRE(!ec);
  python_run py(key + " probe");
  co_await wait_until(py.done);
  BOOST_CHECK_EQUAL(py.output, "busy\nnot-owned\n");
  auto value = co_await must(c, "GET", key);
  BOOST_CHECK_EQUAL(value.string(), l.token());
  auto [release_ec] = co_await l.release(tuple_token);
  BOOST_CHECK(!release_ec);
}

asio::awaitable<void> dlock_cannot_take_or_release_theirs(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("interop-theirs");
  redis::lock_options short_ttl;
  short_ttl.ttl = 100ms;
  redis::lock stale(c, key, short_ttl);  // will have expired when python takes the key
  auto [ec] = co_await stale.acquire(tuple_token);
  BOOST_REQUIRE(!ec);
  asio::steady_timer t(ex, 200ms);
  co_await t.async_wait(tuple_token);

  python_run py(key + " hold 1.0");
  co_await wait_until(py.first_line);
  auto value = co_await must(c, "GET", key);
  BOOST_REQUIRE(value.is_bulk());
  std::string theirs(value.string());
  redis::lock ours(c, key);
  auto [try_ec] = co_await ours.try_acquire(tuple_token);
  BOOST_CHECK(try_ec == dlock::error::taken);
  // The lock contract: a release after a loss (here the validity ran out)
  // reports the loss; either way it must not touch python's key (checked below).
  auto [release_ec] = co_await stale.release(tuple_token);
  BOOST_CHECK_MESSAGE(release_ec == dlock::error::lost, release_ec.message());
  auto [extend_ec] = co_await stale.extend(10000ms, tuple_token);
  BOOST_CHECK(extend_ec == dlock::error::not_held);  // released above: this object holds nothing
  value = co_await must(c, "GET", key);
  BOOST_CHECK_EQUAL(value.string(), theirs);  // python's lock is intact
  co_await wait_until(py.done);
  BOOST_CHECK(py.output.find("released") != std::string::npos);  // and python released it itself
  BOOST_CHECK(py.output.find(theirs) != std::string::npos);
}

struct sections {
  int overlaps = 0;
  int errors = 0;
  int finished = 0;
};

asio::awaitable<void> dlock_contender(redis::connection& c, std::string key, std::string counter,
                                      std::shared_ptr<sections> s, int n) {
  redis::lock_options o;
  o.ttl = 5000ms;
  o.wait = 120000ms;
  o.retry_delay = 2ms;
  o.retry_jitter = 1ms;
  redis::lock l(c, key, o);
  asio::steady_timer t(c.get_executor());
  for (int i = 0; i < n; ++i) {
    auto [ec] = co_await l.acquire(tuple_token);
    if (ec) {
      ++s->errors;
      continue;
    }
    auto inside = co_await must(c, "INCR", counter);
    if (inside.integer() != 1) ++s->overlaps;
    t.expires_after(2ms);
    co_await t.async_wait(tuple_token);
    co_await must(c, "DECR", counter);
    auto [release_ec] = co_await l.release(tuple_token);
    if (release_ec) ++s->errors;
  }
  ++s->finished;
}

asio::awaitable<void> contend_with_python(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("interop-contend");
  auto counter = key + "-inside";
  constexpr int n = 40;
  python_run py(key + " contend " + counter + " " + std::to_string(n));
  auto s = std::make_shared<sections>();
  for (int i = 0; i < 2; ++i)
    asio::co_spawn(ex, dlock_contender(c, key, counter, s, n), [](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);
    });
  co_await wait_until(py.done);
  asio::steady_timer t(ex);
  while (s->finished < 2) {
    t.expires_after(5ms);
    co_await t.async_wait(tuple_token);
  }
  BOOST_CHECK_EQUAL(py.output, "overlaps 0\n");
  BOOST_CHECK_EQUAL(s->overlaps, 0);
  BOOST_CHECK_EQUAL(s->errors, 0);
  co_await must(c, "DEL", counter);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_interop)

BOOST_AUTO_TEST_CASE(redis_py_cannot_take_or_release_a_dlock_lock) { run(&python_cannot_take_or_release_ours); }
BOOST_AUTO_TEST_CASE(dlock_cannot_take_or_release_a_redis_py_lock) { run(&dlock_cannot_take_or_release_theirs); }
BOOST_AUTO_TEST_CASE(dlock_and_redis_py_contend_without_overlap) { run(&contend_with_python); }

BOOST_AUTO_TEST_SUITE_END()
