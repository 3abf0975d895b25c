// Shared by redis_semaphore*.cpp: commands checked on the server, the
// semaphore's operations as awaitables returning their error, and the
// census every holder checks (in-process count and the server's ZCARD).
#pragma once

#include "redis_support.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/error.hpp>
#include <dlock/redis/semaphore.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace semaphore_test {

namespace asio = boost::asio;
namespace redis = dlock::redis;
using dlock::error_code;
using namespace std::chrono_literals;
using dlock::test::sleep_for;
using redis_test::master_options;
using redis_test::run;

inline constexpr auto tuple_token = asio::as_tuple(asio::deferred);
using connections = std::vector<std::unique_ptr<redis::connection>>;

template <class... Args>
asio::awaitable<redis::reply> must(redis::connection& c, Args... args) {
  auto op = c.exec(redis::command(args...), tuple_token);
  auto [ec, r] = co_await std::move(op);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  co_return r;
}
inline asio::awaitable<std::int64_t> count(redis::connection& c, std::string key) {
  auto r = co_await must(c, "ZCARD", key);
  co_return r.integer();
}
inline asio::awaitable<bool> member(redis::connection& c, std::string key, std::string token) {
  auto r = co_await must(c, "ZSCORE", key, token);
  co_return !r.is_nil();
}
inline asio::awaitable<error_code> acquire(redis::semaphore& s) {
  auto [ec] = co_await s.acquire(tuple_token);
  co_return ec;
}
inline asio::awaitable<error_code> try_acquire(redis::semaphore& s) {
  auto [ec] = co_await s.try_acquire(tuple_token);
  co_return ec;
}
inline asio::awaitable<error_code> acquire_for(redis::semaphore& s, std::chrono::milliseconds limit) {
  auto [ec] = co_await s.acquire_for(limit, tuple_token);
  co_return ec;
}
inline asio::awaitable<error_code> release(redis::semaphore& s) {
  auto [ec] = co_await s.release(tuple_token);
  co_return ec;
}
inline asio::awaitable<error_code> extend(redis::semaphore& s, std::chrono::milliseconds ttl) {
  auto [ec] = co_await s.extend(ttl, tuple_token);
  co_return ec;
}
inline asio::awaitable<connections> connect_all(asio::any_io_executor ex, int n) {
  connections out;
  for (int i = 0; i < n; ++i) {
    out.push_back(std::make_unique<redis::connection>(ex, master_options()));
    co_await out.back()->connect();
  }
  co_return out;
}

inline redis::semaphore_options options(std::chrono::milliseconds ttl, std::chrono::milliseconds retry = 100ms) {
  redis::semaphore_options o;
  o.ttl = ttl;
  o.retry_delay = retry;
  o.retry_jitter = retry / 2;
  return o;
}

/// What the holders of one key saw, checked at the end of a test.
struct census {
  int max_leases = 0;
  int inside = 0;  // holders now, counted in process
  int most_inside = 0;
  int over = 0;      // more holders than leases, in process or on the server
  int not_ours = 0;  // a holder whose member is not in the set
  int errors = 0;
  int entries = 0;
  int aborted = 0;
  int finished = 0;
  int total = 0;
};

/// One hold: count it, check the server agrees, hold a few ms, give it back.
inline asio::awaitable<void> hold_once(redis::connection& c, redis::semaphore& s, census& k, std::minstd_rand& rng) {
  k.most_inside = std::max(k.most_inside, ++k.inside);
  ++k.entries;
  if (k.inside > k.max_leases) ++k.over;
  auto holders = co_await count(c, s.key());
  if (holders > k.max_leases) ++k.over;
  if (!co_await member(c, s.key(), s.token())) ++k.not_ours;
  co_await sleep_for(std::chrono::microseconds(rng() % 3000));
  --k.inside;  // before the release: the server's count is never below ours
  if (auto ec = co_await release(s)) ++k.errors;
}

}  // namespace semaphore_test
