#include <dlock/redis/detail/token.hpp>

#include <cerrno>
#include <random>
#include <system_error>

#include <sys/random.h>

namespace dlock::redis::detail {

std::string make_token() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "getrandom");
    }
    got += static_cast<std::size_t>(n);
  }
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
