// Redis as run in production, on the Sentinel set of scripts/servers
// (DLOCK_SENTINELS, DLOCK_SENTINEL_MASTER: one master, two replicas):
//   sentinel_single:        1 coroutine, 5,000 acquire+release of dlock::redis::lock on a
//                           connection that found the master through Sentinel (impl dlock),
//                           the raw protocol on that master (impl raw)
//   sentinel_single_direct: the same dlock loop on a plain connection to that master: the
//                           cost of Sentinel is sentinel_single's ratio over this one's
//   sentinel_wait_single:   replica acknowledgement (lock_options::replicas = 1): dlock,
//                           against raw SET NX PX + WAIT 1 in one write, then the release
// Prints nothing (and says why on stderr) when no Sentinel set is named.
#include "common.hpp"
#include "redis_raw.hpp"

#include "redis/locks/token.hpp"
#include <dlock/redis/lock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/write.hpp>

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using bench_clock = dlock::bench::clock;
using dlock::bench::recorder;
using namespace dlock::bench::redis_raw;

namespace {

constexpr auto tuple_token = asio::as_tuple(asio::deferred);
constexpr int single_ops = 5000;
constexpr const char* replica_wait = "100";  // ms: WAIT's timeout, dlock's replica_timeout
const std::string release_source =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

redis::options sentinel_options() {
  redis::options o;
  std::stringstream list(std::getenv("DLOCK_SENTINELS"));
  for (std::string item; std::getline(list, item, ',');) {
    auto colon = item.rfind(':');
    o.sentinel.sentinels.push_back({item.substr(0, colon), static_cast<std::uint16_t>(std::stoi(item.substr(colon + 1)))});
  }
  o.sentinel.master_name = dlock::bench::env_or("DLOCK_SENTINEL_MASTER", "dlock-master");
  o.observer = dlock::bench::dlock_observer();
  return o;
}

bool waits(const std::string& name) { return name == "sentinel_wait_single"; }

// ---- raw ----

asio::awaitable<void> raw_run(target t, int rounds, std::string name) {
  raw_client c(co_await asio::this_coro::executor);
  co_await raw_connect(c, t);
  // Built apart: g++ 12 miscompiles a braced list inside a co_await expression.
  auto load = resp({"SCRIPT", "LOAD", release_source});
  co_await asio::async_write(c.socket, asio::buffer(load), asio::deferred);
  co_await read_replies(c, 1, false);
  auto release_sha = redis::sha1_hex(release_source);
  auto key = unique_key("raw-" + name, 0);
  recorder rec;
  rec.start();
  int failures = 0;
  for (int i = 0; i < rounds; ++i) {
    auto begin = bench_clock::now();
    auto token = redis::detail::make_token();
    std::string out = resp({"SET", key, token, "NX", "PX", "10000"});
    if (waits(name)) out += resp({"WAIT", "1", replica_wait});
    co_await asio::async_write(c.socket, asio::buffer(out), asio::deferred);
    failures += 1 - co_await read_replies(c, 1, true);
    if (waits(name)) failures += co_await read_integer(c) < 1;  // how many replicas have it
    out = resp({"EVALSHA", release_sha, "1", key, token});
    co_await asio::async_write(c.socket, asio::buffer(out), asio::deferred);
    failures += 1 - co_await read_replies(c, 1, false);
    rec.add_latency(bench_clock::now() - begin);
  }
  rec.stop();
  if (failures) throw std::runtime_error("raw: " + std::to_string(failures) + " failed operations");
  rec.print(name, "raw", std::uint64_t(rounds));
}

// ---- dlock ----

asio::awaitable<void> dlock_run(redis::options o, int rounds, std::string name) {
  redis::connection c(co_await asio::this_coro::executor, o);
  co_await c.connect();
  redis::lock_options lo;
  if (waits(name)) {
    lo.replicas = 1;
    lo.replica_timeout = std::chrono::milliseconds(std::atoi(replica_wait));
  }
  redis::lock l(c, unique_key("dlock-" + name, 0), lo);
  co_await l.try_acquire();  // warm: the release script loaded, as the raw run's SCRIPT LOAD
  co_await l.release();
  recorder rec;
  rec.start();
  int failures = 0;
  for (int i = 0; i < rounds; ++i) {
    auto begin = bench_clock::now();
    auto [acquire_ec] = co_await l.try_acquire(tuple_token);
    auto [release_ec] = co_await l.release(tuple_token);
    failures += acquire_ec || release_ec;
    rec.add_latency(bench_clock::now() - begin);
  }
  rec.stop();
  c.close();
  if (failures) throw std::runtime_error("dlock: " + std::to_string(failures) + " failed operations");
  rec.print(name, dlock::bench::dlock_impl(), std::uint64_t(rounds));
}

// The master the sentinels name, as host and port.
asio::awaitable<void> find_master(target* out) {
  redis::connection c(co_await asio::this_coro::executor, sentinel_options());
  co_await c.connect();
  auto op = c.exec(redis::command("CONFIG", "GET", "port"), asio::deferred);
  auto port = co_await std::move(op);
  out->host = "127.0.0.1";
  out->port = std::string(port.elements().at(1).string());
  c.close();
}

void run(asio::awaitable<void> scenario) {
  asio::io_context io(1);
  std::exception_ptr failure;
  asio::co_spawn(io, std::move(scenario), [&](std::exception_ptr e) { failure = e; });
  io.run();
  if (failure) std::rethrow_exception(failure);
}

void raw_side(const target& t, const std::string& name) {
  if (dlock::bench::wanted(name, "raw")) run(raw_run(t, dlock::bench::scaled(single_ops), name));
}

void dlock_side(const redis::options& o, const std::string& name) {
  dlock::bench::each_dlock_impl([&] {
    if (!dlock::bench::wanted(name, dlock::bench::dlock_impl())) return;
    auto with_observer = o;
    with_observer.observer = dlock::bench::dlock_observer();
    run(dlock_run(with_observer, dlock::bench::scaled(single_ops), name));
  });
}

}  // namespace

// Raw, Sentinel and direct alternate, three times each, so a burst of load
// on the shared machine hits them all; compare the medians.
int main() {
  if (!std::getenv("DLOCK_SENTINELS")) {
    std::cerr << "redis_sentinel: DLOCK_SENTINELS is not set (DLOCK_SENTINEL=1 scripts/servers start): nothing run\n";
    return 0;
  }
  target master;
  run(find_master(&master));
  auto direct = redis::options();
  direct.host = master.host;
  direct.port = static_cast<std::uint16_t>(std::stoi(master.port));
  for (int round = 0; round < 3; ++round) {
    raw_side(master, "sentinel_single");
    dlock_side(sentinel_options(), "sentinel_single");
    dlock_side(direct, "sentinel_single_direct");
  }
  for (int round = 0; round < 3; ++round) {
    raw_side(master, "sentinel_wait_single");
    dlock_side(sentinel_options(), "sentinel_wait_single");
  }
  return 0;
}
