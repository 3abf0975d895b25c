#include "redis/engine/scripts.hpp"

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

const script& fenced_acquire_script() {
  static const script s(
      "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
      "return redis.call('incr', KEYS[2]) end "
      "return 0");
  return s;
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

}  // namespace dlock::redis::detail
