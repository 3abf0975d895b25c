// Durations on the command line: 500ms, 30s, 2m, 1h (a bare number is seconds).
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace dlock::cli {

/// A non-negative whole number with an optional unit (ms, s, m, h; seconds
/// when none). `std::nullopt` for anything else, or for more than ~24 days
/// (the duration must fit the timers and TTLs it is used for).
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) noexcept;

}  // namespace dlock::cli
