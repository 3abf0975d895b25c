// The environment CMD runs with: dlock's own, plus what it learned holding the lock.
#pragma once

#include <string>
#include <vector>

namespace dlock::cli {

/// The variables dlock sets for CMD. Inherited values of these names are
/// always dropped, so a dlock nested in another never passes on its parent's.
inline constexpr const char* fencing_token_variable = "DLOCK_FENCING_TOKEN";
inline constexpr const char* lock_name_variable = "DLOCK_LOCK_NAME";

/// `inherited` ("NAME=value" strings, null-terminated like `environ`, may be
/// null) without dlock's variables, without the secrets dlock reads (its
/// servers' credentials are not CMD's business) and without any name set by
/// `assignments` ("NAME=value"), followed by `assignments`.
std::vector<std::string> child_environment(const char* const* inherited,
                                           const std::vector<std::string>& assignments);

}  // namespace dlock::cli
