// Lock tokens: 128 bits from getrandom(2) (a CSPRNG), as 32 hex digits.
// Also the seed of the (non-secret) retry jitter.
#pragma once

#include <cstdint>
#include <string>

namespace dlock::redis::detail {

/// A fresh token; never the same twice. Throws std::system_error if the
/// kernel has no randomness to give (never after early boot).
std::string make_token();

/// A seed for a jitter engine: distinct per call, cheap (no system call after
/// the first on each thread; std::random_device costs a VM exit here).
std::uint32_t jitter_seed();

}  // namespace dlock::redis::detail
