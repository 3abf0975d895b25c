#include "retry.hpp"

#include <dlock/zk/error.hpp>

#include "detail/random.hpp"

#include <algorithm>
#include <random>

namespace dlock::zk::detail {

bool is_retryable(const error_code& ec) noexcept {
  return ec == zk::error::connection_loss || ec == zk::error::operation_timeout;
}

std::chrono::milliseconds backoff_delay(const retry_policy& policy, int retry) noexcept {
  auto delay = std::max(policy.initial_backoff, std::chrono::milliseconds::zero());
  // Doubling stops at the cap (and after 62 rounds), so it cannot overflow.
  for (int i = 1; i < retry && i < 63 && delay < policy.max_backoff; ++i) delay *= 2;
  return std::min(delay, policy.max_backoff);
}

std::chrono::milliseconds spread(std::chrono::milliseconds delay, std::uint32_t random) noexcept {
  auto quarter = delay.count() / 4;
  if (quarter <= 0) return delay;
  auto extra = static_cast<std::chrono::milliseconds::rep>((static_cast<std::uint64_t>(quarter) * random) >> 32);
  return delay + std::chrono::milliseconds(extra);
}

std::chrono::milliseconds with_jitter(std::chrono::milliseconds delay) {
  // Not secret, only different per process: seeded once per thread.
  thread_local std::minstd_rand engine = [] {
    std::uint32_t seed = 0;
    dlock::detail::fill_random(&seed, sizeof seed);
    return std::minstd_rand(seed);
  }();
  std::uint32_t random = static_cast<std::uint32_t>(engine()) ^ (static_cast<std::uint32_t>(engine()) << 16);
  return spread(delay, random);
}

}  // namespace dlock::zk::detail
