// Lock tokens: 128 bits from getrandom(2) (a CSPRNG), as 32 hex digits.
// Also the seed of the (non-secret) retry jitter.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::redis::detail {

/// A token's 32 hex digits, inline (no allocation).
struct token_text {
  std::array<char, 32> digits;
  std::string_view view() const noexcept { return {digits.data(), digits.size()}; }
};

/// A fresh token; never the same twice. Throws std::system_error if the
/// kernel has no randomness to give (never after early boot).
token_text make_token_text();
std::string make_token();

/// A seed for a jitter engine: distinct per call, cheap (no system call after
/// the first on each thread; std::random_device costs a VM exit here).
std::uint32_t jitter_seed();

}  // namespace dlock::redis::detail
