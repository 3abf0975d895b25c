#include "dlock/duration.hpp"

#include <charconv>
#include <cstdint>

namespace dlock::cli {
namespace {

// Redis takes TTLs in milliseconds as a 32-bit friendly number in practice;
// 2^31 ms (about 24.8 days) is plenty for a lock, a timeout or a grace period.
constexpr std::int64_t max_milliseconds = 2'147'483'647;

std::optional<std::int64_t> unit_in_milliseconds(std::string_view unit) noexcept {
  if (unit.empty() || unit == "s") return 1000;
  if (unit == "ms") return 1;
  if (unit == "m") return 60'000;
  if (unit == "h") return 3'600'000;
  return std::nullopt;
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) noexcept {
  std::int64_t number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || end == text.data() || number < 0) return std::nullopt;
  auto unit = unit_in_milliseconds(text.substr(static_cast<std::size_t>(end - text.data())));
  if (!unit || number > max_milliseconds / *unit) return std::nullopt;
  return std::chrono::milliseconds(number * *unit);
}

}  // namespace dlock::cli
