#include "redis/locks/algorithm/retry_schedule.hpp"

#include <algorithm>
#include <cmath>

namespace dlock::redis::detail {

using std::chrono::milliseconds;

retry_schedule::retry_schedule(int retries, milliseconds delay, milliseconds jitter,
                               std::optional<clock::time_point> deadline) noexcept
    : retries_(retries), delay_(delay), jitter_(jitter), deadline_(deadline) {}

std::optional<milliseconds> retry_schedule::next(clock::time_point now, double random) noexcept {
  if (retries_ >= 0 && attempts_ > retries_) return std::nullopt;
  random = std::clamp(random, 0.0, 1.0);
  auto offset = std::llround((2.0 * random - 1.0) * static_cast<double>(jitter_.count()));
  auto pause = std::max(milliseconds::zero(), delay_ + milliseconds(offset));
  // An attempt that would start after the deadline could not finish before it.
  if (deadline_ && now + pause >= *deadline_) return std::nullopt;
  ++attempts_;
  return pause;
}

}  // namespace dlock::redis::detail
