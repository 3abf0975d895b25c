#include "redis/locks/token.hpp"

#include "detail/random.hpp"

#include <random>

namespace dlock::redis::detail {

token_text make_token_text() {
  unsigned char bytes[16];
  dlock::detail::fill_random(bytes, sizeof bytes);
  static const char hex[] = "0123456789abcdef";
  token_text token;
  for (std::size_t i = 0; i < sizeof bytes; ++i) {
    token.digits[2 * i] = hex[bytes[i] >> 4];
    token.digits[2 * i + 1] = hex[bytes[i] & 0xF];
  }
  return token;
}

std::string make_token() { return std::string(make_token_text().view()); }

std::uint32_t jitter_seed() {
  thread_local std::mt19937 seeds(std::random_device{}());
  return static_cast<std::uint32_t>(seeds());
}

}  // namespace dlock::redis::detail
