#include "redis/token.hpp"

#include "detail/random.hpp"

#include <random>

namespace dlock::redis::detail {

std::string make_token() {
  unsigned char bytes[16];
  dlock::detail::fill_random(bytes, sizeof bytes);
  static const char hex[] = "0123456789abcdef";
  std::string token(32, '0');
  for (std::size_t i = 0; i < sizeof bytes; ++i) {
    token[2 * i] = hex[bytes[i] >> 4];
    token[2 * i + 1] = hex[bytes[i] & 0xF];
  }
  return token;
}

std::uint32_t jitter_seed() {
  thread_local std::mt19937 seeds(std::random_device{}());
  return static_cast<std::uint32_t>(seeds());
}

}  // namespace dlock::redis::detail
