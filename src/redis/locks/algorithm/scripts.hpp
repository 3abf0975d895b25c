// The compare-and-act scripts every Redis lock client uses (redis.io,
// redis-py, redsync, node-redlock): the single lock and Redlock share them.
// And the fencing scripts: each lock key has a companion counter,
// fencing_counter_key(key), that only grows (see include/dlock/redis/lock.hpp
// and redlock.hpp for the argument).
#pragma once

#include <dlock/redis/script.hpp>

#include <string>
#include <string_view>

namespace dlock::redis::detail {

/// DEL KEYS[1] if it holds ARGV[1] (the token); returns 1 when deleted.
const script& release_script();
/// PEXPIRE KEYS[1] ARGV[2] if it holds ARGV[1]; returns 1 when extended.
const script& extend_script();

/// Lua functions that compare decimal integers given as text exactly over
/// the whole int64 range: `int_text(s)` (an optional '-' and digits) and
/// `int_less(a, b)`. Lua's numbers are doubles, exact only up to 2^53, so
/// tonumber() would take INT64_MAX - 1 and INT64_MAX for one value. Put in
/// front of the scripts that compare fencing tokens or counters.
extern const char* const exact_integer_lua;

/// The companion counter of lock key `key`: "<key>:fencing".
std::string fencing_counter_key(std::string_view key);

/// A Redlock master: SET KEYS[1] ARGV[1] NX PX ARGV[2] and, when set, INCR
/// KEYS[2] (the counter) in the same step; but a missing counter is not
/// created (a master that lost its data must not count from 1: it is
/// re-seeded by fencing_write_back_script). Returns {1, counter} when set,
/// {0, counter} when taken; counter -1 when missing.
const script& redlock_fenced_acquire_script();

/// KEYS[1] = max(KEYS[1], ARGV[1]); returns the counter after.
const script& fencing_write_back_script();

/// redis::semaphore's sorted set KEYS[1]: members are holders' tokens,
/// scored by their lease's expiry in milliseconds of the server's clock
/// (TIME, read in the script). Each script keeps the key alive at least as
/// long as its longest lease, so an abandoned set goes away by itself.
///
/// Drops the expired members, then adds ARGV[1] for ARGV[2] ms if fewer
/// than ARGV[3] remain. Returns 1 when added, 0 when all leases are held.
const script& semaphore_acquire_script();
/// Moves ARGV[1]'s expiry to ARGV[2] ms from now if it is there and
/// unexpired. Returns 1 when extended, 0 when not ours.
const script& semaphore_extend_script();
/// Removes ARGV[1]. Returns 1 when it was there and unexpired, else 0.
const script& semaphore_release_script();

}  // namespace dlock::redis::detail
