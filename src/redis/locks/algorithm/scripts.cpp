#include "redis/locks/algorithm/scripts.hpp"

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

// Two texts of equal length (no sign, no leading zeros) compare as their
// first digits, then their last nine: each part is exact as a double.
const char* const exact_integer_lua =
    "local function int_text(s) return type(s) == 'string' and string.match(s, '^%-?%d+$') ~= nil end "
    "local function int_less(a, b) "
    "local na, nb = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-' "
    "if na ~= nb then return na end "
    "if na then return int_less(string.sub(b, 2), string.sub(a, 2)) end "
    "a = (string.gsub(a, '^0+', '')) b = (string.gsub(b, '^0+', '')) "
    "if #a ~= #b then return #a < #b end "
    "local ha, hb = tonumber(string.sub(a, 1, -10)) or 0, tonumber(string.sub(b, 1, -10)) or 0 "
    "if ha ~= hb then return ha < hb end "
    "return tonumber(string.sub(a, -9)) < tonumber(string.sub(b, -9)) end\n";

std::string fencing_counter_key(std::string_view key) {
  std::string counter(key);
  counter += ":fencing";
  return counter;
}

// Counters travel as text: an integer that passed through a Lua number
// (INCR's reply included) is rounded above 2^53. A counter that is not an
// integer counts as none. An INCR that fails (INT64_MAX reached) deletes the
// key it just set and answers the error: the master is then counted failed,
// with nothing left behind.
const script& redlock_fenced_acquire_script() {
  static const script s(std::string(exact_integer_lua) +
                        "local counter = redis.call('get', KEYS[2]) "
                        "if not int_text(counter) then counter = nil end "
                        "if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
                        "return {0, counter or '-1'} end "
                        "if not counter then return {1, '-1'} end "
                        "local raised = redis.pcall('incr', KEYS[2]) "
                        "if type(raised) == 'table' and raised.err then redis.call('del', KEYS[1]) return raised end "
                        "return {1, redis.call('get', KEYS[2])}");
  return s;
}

const script& fencing_write_back_script() {
  static const script s(std::string(exact_integer_lua) +
                        "local counter = redis.call('get', KEYS[1]) "
                        "if counter and not int_text(counter) then "
                        "return redis.error_reply('ERR the fencing counter is not an integer') end "
                        "if not counter or int_less(counter, ARGV[1]) then "
                        "redis.call('set', KEYS[1], ARGV[1]) return ARGV[1] end "
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
