// Secrets for the servers (passwords, ZooKeeper digest credentials): they come
// from environment variables or files, never from the command line, where
// any local user can read them in the process list.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dlock::cli {

/// The Redis AUTH password (like redis-cli's REDISCLI_AUTH).
inline constexpr const char* redis_password_variable = "DLOCK_REDIS_PASSWORD";
inline constexpr const char* sentinel_password_variable = "DLOCK_SENTINEL_PASSWORD";
/// ZooKeeper digest credentials, "user:password".
inline constexpr const char* zk_auth_variable = "DLOCK_ZK_AUTH";

/// A secret file's contents without the one line ending ("\n" or "\r\n") an
/// editor or `echo` leaves; anything else (spaces, inner newlines) is kept.
std::string_view without_line_end(std::string_view text) noexcept;

struct digest_identity {
  std::string user;
  std::string password;
};

/// "user:password" split at the first colon (the password may hold more);
/// nullopt without a colon or with an empty user.
std::optional<digest_identity> parse_digest(std::string_view text);

}  // namespace dlock::cli
