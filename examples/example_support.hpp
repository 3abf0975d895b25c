// What every example needs and none of them is about: reading the servers
// from the environment, running a coroutine to the end with an exit status,
// sleeping, and checking an outcome.
#pragma once

#include <dlock/redis/connection.hpp>
#include <dlock/zk/options.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace example {

namespace asio = boost::asio;
using namespace std::chrono_literals;

/// `name`'s value, or `fallback` when it is unset or empty.
inline std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

/// DLOCK_ZK_HOSTS as client options, with short timeouts so a failure shows quickly.
inline dlock::zk::options zk_options() {
  dlock::zk::options options;
  options.hosts = env_or("DLOCK_ZK_HOSTS", "127.0.0.1:2181");
  options.session_timeout = 4s;
  options.connect_timeout = 10s;
  return options;
}

/// DLOCK_REDIS_MASTERS ("host:port,host:port,...") as connection options.
inline std::vector<dlock::redis::options> redis_masters() {
  std::string list = env_or("DLOCK_REDIS_MASTERS", "127.0.0.1:6379");
  std::vector<dlock::redis::options> masters;
  std::size_t start = 0;
  while (start <= list.size()) {
    auto end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    auto item = list.substr(start, end - start);
    auto colon = item.rfind(':');
    if (colon != std::string::npos) {
      dlock::redis::options o;
      o.host = item.substr(0, colon);
      o.port = static_cast<std::uint16_t>(std::stoi(item.substr(colon + 1)));
      masters.push_back(o);
    }
    start = end + 1;
  }
  return masters;
}

/// One connected `redis::connection` per master (the first `count` of them).
inline asio::awaitable<std::vector<std::shared_ptr<dlock::redis::connection>>> connect_masters(std::size_t count) {
  auto executor = co_await asio::this_coro::executor;
  std::vector<std::shared_ptr<dlock::redis::connection>> masters;
  for (auto& options : redis_masters()) {
    if (masters.size() == count) break;
    masters.push_back(std::make_shared<dlock::redis::connection>(executor, options));
    co_await masters.back()->connect();
  }
  if (masters.size() < count) throw std::runtime_error("DLOCK_REDIS_MASTERS names too few masters");
  co_return masters;
}

/// A name no earlier run used, so reruns never meet old state.
inline std::string unique(const std::string& prefix) { return prefix + "-" + std::to_string(::getpid()); }

inline asio::awaitable<void> sleep_for(std::chrono::steady_clock::duration d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(asio::as_tuple(asio::deferred));  // as_tuple: a cancelled sleep does not throw
}

/// Runs `tasks` concurrently and returns when all have finished; then
/// rethrows the first failure, if any.
inline asio::awaitable<void> all_of(std::vector<asio::awaitable<void>> tasks) {
  namespace ex = asio::experimental;
  if (tasks.empty()) co_return;
  auto executor = co_await asio::this_coro::executor;
  using spawned = decltype(asio::co_spawn(executor, std::move(tasks.front()), asio::deferred));
  std::vector<spawned> ops;
  for (auto& task : tasks) ops.push_back(asio::co_spawn(executor, std::move(task), asio::deferred));
  auto [order, failures] =
      co_await ex::make_parallel_group(std::move(ops)).async_wait(ex::wait_for_all(), asio::deferred);
  for (auto& failure : failures)
    if (failure) std::rethrow_exception(failure);
}

/// Fails the example (exit status 1) when `ok` is false.
inline void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("check failed: " + what);
}

/// Runs `work` on a fresh io_context until everything it started is done.
/// Returns the exit status: 0, or 1 when `work` threw (the error is printed).
inline int run(const char* name, asio::awaitable<void> (*work)()) {
  asio::io_context io;
  int status = 0;
  asio::co_spawn(io, work(), [&](std::exception_ptr failure) {
    if (!failure) return;
    status = 1;
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", name, e.what());
    }
  });
  io.run();
  return status;
}

}  // namespace example
