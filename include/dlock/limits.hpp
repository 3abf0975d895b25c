/// @file
/// Bounds of the inputs dlock accepts (RELIABILITY.md, "What is refused, and why").
#pragma once

#include <chrono>

namespace dlock {

/// The longest duration any option or argument of a Redis lock, semaphore
/// or Redlock may have (100 years): a TTL, wait, delay, jitter, hold cap,
/// wait limit, extension or `acquire_for` limit above it fails the
/// operation with `dlock::error::invalid_argument`, nothing sent. Deadlines
/// are kept on `std::chrono::steady_clock`, in nanoseconds, which overflow
/// at 292 years: this bound keeps every sum of a time point and an option
/// exact.
inline constexpr std::chrono::milliseconds max_duration = std::chrono::hours(24 * 365 * 100);

}  // namespace dlock
