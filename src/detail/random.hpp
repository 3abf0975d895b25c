// Bytes from the kernel's CSPRNG (getrandom(2)), for lock tokens and seeds.
#pragma once

#include <cerrno>
#include <cstddef>
#include <system_error>

#include <sys/random.h>

namespace dlock::detail {

/// Fills `out` entirely. Throws std::system_error if the kernel has no
/// randomness to give (never after early boot).
inline void fill_random(void* out, std::size_t size) {
  auto* bytes = static_cast<unsigned char*>(out);
  std::size_t filled = 0;
  while (filled < size) {
    auto n = ::getrandom(bytes + filled, size - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "getrandom");
    }
    filled += static_cast<std::size_t>(n);
  }
}

}  // namespace dlock::detail
