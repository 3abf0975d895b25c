// The options of every Redis lock in one vocabulary, I/O-free: what each
// kind refuses, and a redis::lock's options as the engine reads them (the
// engine's are a redlock's: a lock is its one-server case).
#pragma once

#include <dlock/config.hpp>
#include <dlock/redis/detail/redlock_options.hpp>
#include <dlock/redis/lock_options.hpp>

namespace dlock::redis::detail {

/// Options a redis::lock or semaphore cannot work with (UB, a tight loop,
/// no validity): dlock::error::invalid_argument, else empty. The key and
/// ttl are the commands' to check (hold_commands::invalid).
error_code invalid_lock_options(const lock_options& o);

/// A lock's options in the engine's words: no per-master timeout (the
/// connection's command timeout applies), retries until `wait` runs out (a
/// wait of 0: one attempt).
redlock_options engine_options(const lock_options& o);

}  // namespace dlock::redis::detail
