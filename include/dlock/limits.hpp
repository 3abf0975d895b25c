/// @file
/// Bounds of the inputs dlock accepts (RELIABILITY.md, "What is refused, and why").
#pragma once

#include <dlock/detail/require_cxx20.hpp>

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

namespace detail {
/// An `acquire_for` limit in whole milliseconds, rounded up, without the
/// overflow of `std::chrono::ceil` near `duration::max()` and `min()`: a
/// limit beyond `max_duration` stays beyond it (and is refused), one <= 0
/// stays <= 0.
constexpr std::chrono::milliseconds limit_in_ms(std::chrono::steady_clock::duration limit) noexcept {
  if (limit > max_duration) return max_duration + std::chrono::milliseconds(1);
  if (limit <= std::chrono::steady_clock::duration::zero()) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(limit);
}
}  // namespace detail

}  // namespace dlock
