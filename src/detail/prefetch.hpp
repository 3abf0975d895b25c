// A hint to the CPU that memory will be read soon. The Redis connection
// issues it a step ahead when it walks requests in order (staging a write,
// handing out replies): by then each request was last touched a round trip
// ago, with 64 clients' state in between, so every one misses the cache. A
// miss fetched ahead overlaps the current step's work instead of stalling
// the next. Only a hint: it never faults, and nothing depends on it.
#pragma once

#include <cstddef>
#include <utility>

namespace dlock::detail {

inline constexpr std::size_t cache_line = 64;

/// The lines of [p, p + Bytes): a few instructions, unrolled.
template <std::size_t Bytes = cache_line>
inline void prefetch(const void* p) noexcept {
  const auto* at = static_cast<const char*>(p);
  [&]<std::size_t... Line>(std::index_sequence<Line...>) {
    (__builtin_prefetch(at + Line * cache_line), ...);
  }(std::make_index_sequence<(Bytes + cache_line - 1) / cache_line>());
  if constexpr (Bytes % cache_line != 0) __builtin_prefetch(at + Bytes - 1);
}

}  // namespace dlock::detail
