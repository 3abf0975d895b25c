#include "redis/engine/scripts.hpp"

#include <initializer_list>

namespace dlock::redis::detail {

const script& release_script() {
  static const script s(
      "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end");
  return s;
}

const script& extend_script() {
  static const script s(
      "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) "
      "else return 0 end");
  return s;
}

std::string fencing_counter_key(std::string_view key) {
  std::string counter(key);
  counter += ":fencing";
  return counter;
}

const script& redlock_fenced_acquire_script() {
  static const script s(
      "local counter = redis.call('get', KEYS[2]) "
      "if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
      "return {0, tonumber(counter) or -1} end "
      "if counter then return {1, redis.call('incr', KEYS[2])} end "
      "return {1, -1}");
  return s;
}

const script& fencing_write_back_script() {
  static const script s(
      "local counter = tonumber(redis.call('get', KEYS[1]) or '-1') "
      "local token = tonumber(ARGV[1]) "
      "if counter < token then redis.call('set', KEYS[1], ARGV[1]) return token end "
      "return counter");
  return s;
}

namespace {

// The server's clock in milliseconds: scores stay below 2^53, so Lua's
// doubles hold them exactly.
constexpr std::string_view server_now =
    "local t = redis.call('time') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) ";
// The key must outlive its longest lease: its expiry is never shortened.
constexpr std::string_view keep_key =
    "if redis.call('pttl', KEYS[1]) < ttl then redis.call('pexpire', KEYS[1], ttl) end ";

std::string lua(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto p : parts) out += p;
  return out;
}

}  // namespace

const script& semaphore_acquire_script() {
  static const script s(lua({server_now,
                             "redis.call('zremrangebyscore', KEYS[1], '-inf', now) "
                             "if redis.call('zcard', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end "
                             "local ttl = tonumber(ARGV[2]) "
                             "redis.call('zadd', KEYS[1], now + ttl, ARGV[1]) ",
                             keep_key, "return 1"}));
  return s;
}

const script& semaphore_extend_script() {
  static const script s(lua({server_now,
                             "local score = redis.call('zscore', KEYS[1], ARGV[1]) "
                             "if not score then return 0 end "
                             "if tonumber(score) <= now then redis.call('zrem', KEYS[1], ARGV[1]) return 0 end "
                             "local ttl = tonumber(ARGV[2]) "
                             "redis.call('zadd', KEYS[1], 'XX', now + ttl, ARGV[1]) ",
                             keep_key, "return 1"}));
  return s;
}

const script& semaphore_release_script() {
  static const script s(lua({server_now,
                             "local score = redis.call('zscore', KEYS[1], ARGV[1]) "
                             "if not score then return 0 end "
                             "redis.call('zrem', KEYS[1], ARGV[1]) "
                             "if tonumber(score) <= now then return 0 end "
                             "return 1"}));
  return s;
}

}  // namespace dlock::redis::detail
