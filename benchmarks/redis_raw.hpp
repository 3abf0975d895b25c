// What the Redis benchmarks share: where the server is, and the raw client
// they measure against (a bare Asio socket and hiredis's reader, the best a
// hand-written pipelined client can do).
#pragma once

#include "common.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <hiredis/hiredis.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

namespace dlock::bench::redis_raw {

namespace asio = boost::asio;

struct target {
  std::string host;
  std::string port;
};

inline target first_master() {
  std::string masters = dlock::bench::env_or("DLOCK_REDIS_MASTERS", "127.0.0.1:6379");
  auto first = masters.substr(0, masters.find(','));
  auto colon = first.rfind(':');
  return {first.substr(0, colon), first.substr(colon + 1)};
}

inline std::string unique_key(const std::string& what, int i) {
  return "bench-" + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(i);
}

// ---- raw: a bare socket and hiredis's reader ----

inline std::string resp(const std::vector<std::string>& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

struct raw_client {
  asio::ip::tcp::socket socket;
  redisReader* reader = redisReaderCreate();
  char buffer[16384];
  explicit raw_client(asio::any_io_executor ex) : socket(ex) {}
  ~raw_client() { redisReaderFree(reader); }
};

// Reads until `count` replies arrived; returns how many were the expected
// kind (OK, else the integer 1).
inline asio::awaitable<int> read_replies(raw_client& c, int count, bool expect_ok) {
  int good = 0;
  while (count > 0) {
    void* reply = nullptr;
    if (redisReaderGetReply(c.reader, &reply) != REDIS_OK) throw std::runtime_error("protocol error");
    if (reply) {
      auto* r = static_cast<redisReply*>(reply);
      good += expect_ok ? (r->type == REDIS_REPLY_STATUS) : (r->type == REDIS_REPLY_INTEGER && r->integer == 1);
      freeReplyObject(r);
      --count;
      continue;
    }
    auto [ec, n] = co_await c.socket.async_read_some(asio::buffer(c.buffer), asio::as_tuple(asio::deferred));
    if (ec) throw boost::system::system_error(ec);
    redisReaderFeed(c.reader, c.buffer, n);
  }
  co_return good;
}

// Reads one reply: its integer (-1 for any other kind).
inline asio::awaitable<long long> read_integer(raw_client& c) {
  for (;;) {
    void* reply = nullptr;
    if (redisReaderGetReply(c.reader, &reply) != REDIS_OK) throw std::runtime_error("protocol error");
    if (reply) {
      auto* r = static_cast<redisReply*>(reply);
      long long value = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
      freeReplyObject(r);
      co_return value;
    }
    auto [ec, n] = co_await c.socket.async_read_some(asio::buffer(c.buffer), asio::as_tuple(asio::deferred));
    if (ec) throw boost::system::system_error(ec);
    redisReaderFeed(c.reader, c.buffer, n);
  }
}

inline asio::awaitable<void> raw_connect(raw_client& c, target t) {
  asio::ip::tcp::resolver resolver(c.socket.get_executor());
  auto endpoints = co_await resolver.async_resolve(t.host, t.port, asio::deferred);
  co_await asio::async_connect(c.socket, endpoints, asio::deferred);
  c.socket.set_option(asio::ip::tcp::no_delay(true));
}

}  // namespace dlock::bench::redis_raw
