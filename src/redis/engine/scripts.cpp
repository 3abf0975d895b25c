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

}  // namespace dlock::redis::detail
