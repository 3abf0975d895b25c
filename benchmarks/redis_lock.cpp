// Single-instance Redis lock: dlock::redis::lock against the raw protocol
// (the same SET NX PX and compare-and-delete EVALSHA on a bare socket, replies
// parsed by the same hiredis reader) against DLOCK_REDIS_MASTERS's first master.
//   redis_single:     1 coroutine, 1 key, 5,000 sequential acquire+release
//   redis_concurrent: 64 coroutines, 64 keys, one connection (raw: 64 in lockstep batches)
// And dlock::redis::semaphore against the same scripts sent raw:
//   redis_semaphore_single:     1 coroutine, a semaphore of 64 leases, 5,000 acquire+release
//   redis_semaphore_concurrent: 64 coroutines on one semaphore of 64 leases (all may hold at once:
//                               this measures the protocol, not waiting), one connection
#include "common.hpp"
#include "redis_raw.hpp"

#include "redis/locks/algorithm/scripts.hpp"
#include "redis/locks/token.hpp"
#include <dlock/redis/lock.hpp>
#include <dlock/redis/semaphore.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <hiredis/hiredis.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using bench_clock = dlock::bench::clock;
using dlock::bench::recorder;
using namespace dlock::bench::redis_raw;

namespace {

constexpr auto tuple_token = asio::as_tuple(asio::deferred);
constexpr int single_ops = 5000;
constexpr int concurrent_clients = 64;
constexpr int concurrent_ops_each = 1000;  // runs long enough (~0.4 s) to rise above the machine's noise
constexpr std::size_t semaphore_leases = 64;
const std::string release_source =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

bool is_semaphore(const std::string& name) { return name.starts_with("redis_semaphore"); }

// The scripts a raw client loads: the lock's release, or the semaphore's acquire and release.
struct raw_scripts {
  std::string acquire_sha, release_sha;
};

asio::awaitable<raw_scripts> raw_load(raw_client& c, bool semaphore) {
  namespace d = redis::detail;
  std::string acquire = semaphore ? d::semaphore_acquire_script().source() : std::string();
  std::string release = semaphore ? d::semaphore_release_script().source() : release_source;
  std::string load = resp({"SCRIPT", "LOAD", release});
  if (semaphore) load += resp({"SCRIPT", "LOAD", acquire});
  co_await asio::async_write(c.socket, asio::buffer(load), asio::deferred);
  co_await read_replies(c, semaphore ? 2 : 1, false);
  co_return raw_scripts{semaphore ? redis::sha1_hex(acquire) : "", redis::sha1_hex(release)};
}

// `clients` keys (or one semaphore) in lockstep: one write of all SETs (or
// acquire scripts), their replies, one write of all releases, their replies:
// the best a pipelined raw client can do.
asio::awaitable<void> raw_run(target t, int clients, int rounds, std::string name) {
  raw_client c(co_await asio::this_coro::executor);
  co_await raw_connect(c, t);
  bool semaphore = is_semaphore(name);
  auto scripts = co_await raw_load(c, semaphore);
  auto leases = std::to_string(semaphore_leases);
  std::vector<std::string> keys;
  for (int i = 0; i < clients; ++i) keys.push_back(unique_key("raw-" + name, semaphore ? 0 : i));
  recorder rec;
  rec.start();
  std::string out;
  int failures = 0;
  for (int round = 0; round < rounds; ++round) {
    auto begin = bench_clock::now();
    std::vector<std::string> tokens;
    out.clear();
    for (int i = 0; i < clients; ++i) {
      tokens.push_back(redis::detail::make_token());
      const auto& key = keys[std::size_t(i)];
      out += semaphore ? resp({"EVALSHA", scripts.acquire_sha, "1", key, tokens.back(), "10000", leases})
                       : resp({"SET", key, tokens.back(), "NX", "PX", "10000"});
    }
    co_await asio::async_write(c.socket, asio::buffer(out), asio::deferred);
    failures += clients - co_await read_replies(c, clients, !semaphore);
    out.clear();
    for (int i = 0; i < clients; ++i)
      out += resp({"EVALSHA", scripts.release_sha, "1", keys[std::size_t(i)], tokens[std::size_t(i)]});
    co_await asio::async_write(c.socket, asio::buffer(out), asio::deferred);
    failures += clients - co_await read_replies(c, clients, false);
    auto latency = bench_clock::now() - begin;
    for (int i = 0; i < clients; ++i) rec.add_latency(latency);
  }
  rec.stop();
  if (failures) throw std::runtime_error("raw: " + std::to_string(failures) + " failed operations");
  rec.print(name, "raw", std::uint64_t(clients) * std::uint64_t(rounds));
}

// ---- dlock ----

struct dlock_shared {
  explicit dlock_shared(asio::any_io_executor ex) : all_done(ex, asio::steady_timer::time_point::max()) {}
  recorder rec;
  int failures = 0;
  int finished = 0;
  int clients = 0;
  asio::steady_timer all_done;  // cancelled by the last client
};

// Scenarios named *_fenced run with fencing (the acquire is a script that
// also increments the key's counter); the others without, like the raw loop.
bool fenced(const std::string& name) { return name.ends_with("_fenced"); }

// One client's loop, on a lock or a semaphore.
template <class Hold>
asio::awaitable<void> hold_loop(Hold& l, int rounds, std::shared_ptr<dlock_shared> shared) {
  for (int i = 0; i < rounds; ++i) {
    auto begin = bench_clock::now();
    auto [acquire_ec] = co_await l.try_acquire(tuple_token);
    auto [release_ec] = co_await l.release(tuple_token);
    if (acquire_ec || release_ec) ++shared->failures;
    shared->rec.add_latency(bench_clock::now() - begin);
  }
  if (++shared->finished == shared->clients) shared->all_done.cancel();
}

asio::awaitable<void> dlock_client(redis::connection& c, std::string key, int rounds,
                                   std::shared_ptr<dlock_shared> shared, bool fencing) {
  redis::lock l(c, key, {.fencing = fencing});
  co_await hold_loop(l, rounds, std::move(shared));
}

asio::awaitable<void> dlock_semaphore_client(redis::connection& c, std::string key, int rounds,
                                             std::shared_ptr<dlock_shared> shared) {
  redis::semaphore s(c, key, semaphore_leases);
  co_await hold_loop(s, rounds, std::move(shared));
}

asio::awaitable<void> dlock_run(target t, int clients, int rounds, std::string name) {
  auto ex = co_await asio::this_coro::executor;
  redis::options o;
  o.host = t.host;
  o.port = static_cast<std::uint16_t>(std::stoi(t.port));
  o.observer = dlock::bench::dlock_observer();
  redis::connection c(ex, o);
  co_await c.connect();
  bool semaphore = is_semaphore(name);
  if (semaphore) {  // warm the script cache, as the raw run's SCRIPT LOAD does
    redis::semaphore warm(c, unique_key("warm-" + name, 0), 1);
    co_await warm.try_acquire();
    co_await warm.release();
  } else {
    redis::lock warm(c, unique_key("warm-" + name, 0), {.fencing = fenced(name)});
    co_await warm.try_acquire();
    co_await warm.release();
  }
  auto shared = std::make_shared<dlock_shared>(ex);
  shared->clients = clients;
  auto before = c.stats();
  shared->rec.start();
  for (int i = 0; i < clients; ++i) {
    if (semaphore)
      asio::co_spawn(ex, dlock_semaphore_client(c, unique_key("dlock-" + name, 0), rounds, shared), asio::detached);
    else
      asio::co_spawn(ex, dlock_client(c, unique_key("dlock-" + name, i), rounds, shared, fenced(name)),
                     asio::detached);
  }
  co_await shared->all_done.async_wait(tuple_token);
  shared->rec.stop();
  auto after = c.stats();
  if (shared->failures) throw std::runtime_error("dlock: " + std::to_string(shared->failures) + " failed operations");
  std::string extra = "\"writes_per_command\":" +
                      std::to_string(double(after.writes - before.writes) / double(after.commands - before.commands));
  shared->rec.print(name, dlock::bench::dlock_impl(), std::uint64_t(clients) * std::uint64_t(rounds), extra);
}

void run_one(asio::awaitable<void> (*scenario)(target, int, int, std::string), target t, int clients, int rounds,
             const std::string& name) {
  if (!dlock::bench::wanted(name, scenario == &raw_run ? "raw" : dlock::bench::dlock_impl())) return;
  asio::io_context io(1);
  std::exception_ptr failure;
  asio::co_spawn(io, scenario(t, clients, rounds, name), [&](std::exception_ptr e) { failure = e; });
  io.run();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

// Raw and dlock alternate, three times each, so a burst of load on the shared
// machine hits both; compare the medians.
int main() {
  auto t = first_master();
  for (int round = 0; round < 3; ++round) {
    run_one(&raw_run, t, 1, dlock::bench::scaled(single_ops), "redis_single");
    dlock::bench::each_dlock_impl([&] { run_one(&dlock_run, t, 1, dlock::bench::scaled(single_ops), "redis_single"); });
  }
  for (int round = 0; round < 3; ++round) {
    run_one(&raw_run, t, concurrent_clients, dlock::bench::scaled(concurrent_ops_each), "redis_concurrent");
    dlock::bench::each_dlock_impl([&] {
      run_one(&dlock_run, t, concurrent_clients, dlock::bench::scaled(concurrent_ops_each), "redis_concurrent");
    });
  }
  for (int round = 0; round < 3; ++round) {
    run_one(&raw_run, t, 1, dlock::bench::scaled(single_ops), "redis_semaphore_single");
    dlock::bench::each_dlock_impl([&] {
      run_one(&dlock_run, t, 1, dlock::bench::scaled(single_ops), "redis_semaphore_single");
    });
  }
  for (int round = 0; round < 3; ++round) {
    run_one(&raw_run, t, concurrent_clients, dlock::bench::scaled(concurrent_ops_each), "redis_semaphore_concurrent");
    dlock::bench::each_dlock_impl([&] {
      run_one(&dlock_run, t, concurrent_clients, dlock::bench::scaled(concurrent_ops_each),
              "redis_semaphore_concurrent");
    });
  }
  // Fencing's cost: the same single-client loop with and without it, alternating.
  for (int round = 0; round < 3; ++round) {
    dlock::bench::each_dlock_impl([&] {
      run_one(&dlock_run, t, 1, dlock::bench::scaled(single_ops), "redis_single_unfenced");
    });
    dlock::bench::each_dlock_impl([&] {
      run_one(&dlock_run, t, 1, dlock::bench::scaled(single_ops), "redis_single_fenced");
    });
  }
  return 0;
}
