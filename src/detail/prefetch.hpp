// A hint to the CPU that memory will be read soon. The Redis connection
// issues it a step ahead when it walks requests in order (staging a write,
// handing out replies): by then each request was last touched a round trip
// ago, with 64 clients' state in between, so every one misses the cache. A
// miss fetched ahead overlaps the current step's work instead of stalling
// the next. Only a hint: it never faults, and nothing depends on it.
#pragma once

#include <cstddef>

namespace dlock::detail {

inline constexpr std::size_t cache_line = 64;

/// The lines of [p, p + bytes).
inline void prefetch(const void* p, std::size_t bytes = cache_line) noexcept {
  const auto* at = static_cast<const char*>(p);
  for (std::size_t offset = 0; offset < bytes; offset += cache_line) __builtin_prefetch(at + offset);
  if (bytes > 0) __builtin_prefetch(at + bytes - 1);
}

}  // namespace dlock::detail
