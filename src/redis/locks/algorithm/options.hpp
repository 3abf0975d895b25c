// The options of every Redis lock in one vocabulary, I/O-free: what each
// kind refuses, and a redis::lock's options as the engine reads them (the
// engine's are a redlock's: a lock is its one-server case).
#pragma once

#include <dlock/config.hpp>
#include <dlock/redis/detail/redlock_options.hpp>
#include <dlock/redis/lock_options.hpp>
#include <dlock/redis/options.hpp>

#include <chrono>
#include <span>
#include <string>

namespace dlock::redis::detail {

/// Options a redis::lock or semaphore cannot work with (UB, a tight loop,
/// no validity): dlock::error::invalid_argument, else empty. The key and
/// ttl are the commands' to check (hold_commands::invalid).
error_code invalid_lock_options(const lock_options& o);

/// A lock's options in the engine's words: no per-master timeout (the
/// connection's command timeout applies), retries until `wait` runs out (a
/// wait of 0: one attempt).
redlock_options engine_options(const lock_options& o);

/// Why these masters cannot make a Redlock ("" when they can): one is null
/// (`masters[i]` null), or one is given twice, which would count twice
/// toward the majority.
std::string redlock_masters_invalid(std::span<const options* const> masters);

/// An extension to `ttl` no lock can make: not in (0, max_duration], or not
/// beyond the per-master timeout (zero: none).
bool extend_ttl_invalid(std::chrono::milliseconds ttl, std::chrono::milliseconds master_timeout) noexcept;

}  // namespace dlock::redis::detail
