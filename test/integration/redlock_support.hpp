// Shared by the redlock tests (integration and fault): connecting to the
// five masters, running a test coroutine, and looking at keys with redis-cli
// (another client than dlock, so the wire format itself is checked).
#pragma once

#include <common/run.hpp>
#include <common/servers.hpp>
#include <dlock/error.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/redlock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace redlock_test {

namespace asio = boost::asio;
namespace redis = dlock::redis;
using dlock::error_code;
using masters_t = std::vector<std::shared_ptr<redis::connection>>;
using namespace std::chrono_literals;
using dlock::test::run;
using dlock::test::sleep_for;

inline constexpr auto tuple_token = asio::as_tuple(asio::deferred);

/// Connections to the first `count` masters of DLOCK_REDIS_MASTERS.
inline asio::awaitable<masters_t> connect_masters(asio::any_io_executor ex, std::size_t count = 5) {
  auto endpoints = dlock::test::redis_masters();
  BOOST_REQUIRE_GE(endpoints.size(), count);
  masters_t masters;
  for (std::size_t i = 0; i < count; ++i) {
    redis::options o;
    o.host = endpoints[i].host;
    o.port = endpoints[i].port;
    o.reconnect_min = 20ms;
    o.reconnect_max = 200ms;
    masters.push_back(std::make_shared<redis::connection>(ex, o));
  }
  for (auto& master : masters) {
    auto op = master->connect(tuple_token);
    auto [ec] = co_await std::move(op);
    BOOST_REQUIRE_MESSAGE(!ec, "connect: " + ec.message());
  }
  co_return masters;
}

inline void close_all(masters_t& masters) {
  for (auto& master : masters) master->close();
}

/// Waits (up to ~10 s) until `master` answers a PING: after a server restart
/// the connection may not have noticed the loss yet, so its state alone
/// says nothing; a failed PING makes it notice and reconnect.
inline asio::awaitable<void> answers_again(redis::connection& master) {
  for (int i = 0; i < 200; ++i) {
    auto ping = master.exec(redis::command{"PING"}, tuple_token);
    auto [ec, answer] = co_await std::move(ping);
    if (!ec) co_return;
    co_await sleep_for(50ms);
  }
  BOOST_FAIL("the master does not answer again");
}

inline std::uint16_t port_of(std::size_t index) { return dlock::test::redis_masters().at(index).port; }

/// `redis-cli -p PORT ARGS`, its output without the trailing newline.
/// Blocking: fine in a test, it only waits for a local server.
inline std::string redis_cli(std::size_t index, const std::string& args) {
  auto cmd = "redis-cli -h 127.0.0.1 -p " + std::to_string(port_of(index)) + " " + args + " 2>&1";
  std::FILE* pipe = ::popen(cmd.c_str(), "r");
  BOOST_REQUIRE(pipe);
  std::string out;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, pipe)) out += buffer;
  ::pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

inline std::string get_key(std::size_t index, const std::string& key) {
  return redis_cli(index, "GET " + key);
}

/// Waits (up to ~5 s) until master `index` no longer has `key`; a background
/// release is sent before lock() returns but may be processed a moment later.
/// Returns whether the key is gone. Sleeps on a timer, so the io_context
/// (and the release it waits for) keeps running meanwhile.
inline asio::awaitable<bool> key_gone_eventually(std::size_t index, std::string key) {
  for (int i = 0; i < 100; ++i) {
    if (redis_cli(index, "EXISTS " + key) == "0") co_return true;
    co_await sleep_for(50ms);
  }
  co_return false;
}

/// The key's PTTL on master `index` once it is above `floor`, or the last
/// one seen after 5 s: operations complete at the majority, and a master
/// answering after it (a NOSCRIPT round trip, say) may lag a little.
inline asio::awaitable<long> pttl_once_above(std::size_t index, std::string key, long floor) {
  long pttl = 0;
  for (int i = 0; i < 100; ++i) {
    pttl = std::stol(redis_cli(index, "PTTL " + key));
    if (pttl > floor) co_return pttl;
    co_await sleep_for(50ms);
  }
  co_return pttl;
}

/// Resumes a paused server when the test leaves its scope, even on failure.
struct paused {
  std::vector<std::string> names;
  explicit paused(std::vector<std::size_t> indexes) {
    for (auto i : indexes) {
      names.push_back(dlock::test::redis_name(i));
      dlock::test::server_action("pause", names.back());
    }
  }
  void resume() {
    for (auto& n : names) dlock::test::server_action("resume", n);
    names.clear();
  }
  ~paused() {
    try {
      resume();
    } catch (...) {
    }
  }
  paused(const paused&) = delete;
  paused& operator=(const paused&) = delete;
};

}  // namespace redlock_test
