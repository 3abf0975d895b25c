// Lock tokens: 128 bits from getrandom(2) (a CSPRNG), as 32 hex digits.
#pragma once

#include <string>

namespace dlock::redis::detail {

/// A fresh token; never the same twice. Throws std::system_error if the
/// kernel has no randomness to give (never after early boot).
std::string make_token();

}  // namespace dlock::redis::detail
