// The compare-and-act scripts every Redis lock client uses (redis.io,
// redis-py, redsync, node-redlock): the single lock and Redlock share them.
#pragma once

#include <dlock/redis/script.hpp>

namespace dlock::redis::detail {

/// DEL KEYS[1] if it holds ARGV[1] (the token); returns 1 when deleted.
const script& release_script();
/// PEXPIRE KEYS[1] ARGV[2] if it holds ARGV[1]; returns 1 when extended.
const script& extend_script();

}  // namespace dlock::redis::detail
