// The options that say how to reach the servers: the connect timeout, and
// the credentials and TLS files of secured servers. Secrets are read from
// environment variables or files only (see secrets.hpp).
#pragma once

#include "dlock/backend.hpp"
#include "dlock/command_line.hpp"

#include <string>
#include <vector>

namespace dlock::cli {

/// --connect-timeout: every subcommand that talks to a server.
void add_connect_timeout_option(po::options_description& options);
/// --zk-auth-file (ZooKeeper digest credentials; also DLOCK_ZK_AUTH).
void add_zk_auth_options(po::options_description& options);
/// --redis-user, --redis-password-file (also DLOCK_REDIS_PASSWORD), --tls,
/// --tls-ca, --tls-cert, --tls-key, --tls-server-name.
void add_redis_auth_options(po::options_description& options);

/// Reaching ZooKeeper at `hosts` with `session_timeout`. Throws usage_error
/// (a Redis-only option given, unreadable or malformed credentials).
zk_settings zk_settings_from(const po::variables_map& values, std::string hosts,
                             std::chrono::milliseconds session_timeout = default_session_timeout);
/// Reaching the Redis `masters`. Throws usage_error (a ZooKeeper-only option
/// given, a TLS file option without --tls, a user without a password, ...).
redis_settings redis_settings_from(const po::variables_map& values, std::vector<host_port> masters);
/// The same, for the master `master_name` the `sentinels` name (--sentinel, --master-name).
redis_settings sentinel_settings_from(const po::variables_map& values, std::vector<host_port> sentinels,
                                      std::string master_name);

/// --help's paragraph on where secrets come from (ZooKeeper's, and with `with_redis` Redis's).
std::string_view secrets_help_text(bool with_redis) noexcept;

}  // namespace dlock::cli
