// Connecting to the servers a subcommand names.
#pragma once

#include "dlock/hosts.hpp"
#include "dlock/secrets.hpp"

#include <dlock/redis/connection.hpp>
#include <dlock/zk/client.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dlock::cli {

/// The ZooKeeper session timeout when --session-timeout is not given ("10s").
inline constexpr std::chrono::milliseconds default_session_timeout{10'000};

/// How to reach ZooKeeper.
struct zk_settings {
  std::string hosts;
  std::chrono::milliseconds session_timeout = default_session_timeout;
  std::chrono::milliseconds connect_timeout = zk::options{}.connect_timeout;
  std::optional<digest_identity> auth;
};

/// How to reach Redis: one server, Redlock's masters (all alike), or the
/// master Sentinel names.
struct redis_settings {
  std::vector<host_port> masters;
  std::chrono::milliseconds connect_timeout = redis::options{}.connect_timeout;
  std::string username;  ///< empty: the default user
  std::string password;  ///< empty: no AUTH
  redis::tls_options tls;
  /// With a master name: `masters` is empty, the sentinels name the master.
  redis::sentinel_options sentinel;
};

/// A ZooKeeper client for `settings` (not connected yet), kept alive until
/// the io_context has drained (see keep_until_drained).
std::shared_ptr<zk::client> make_zk_client(asio::any_io_executor executor, const zk_settings& settings);

/// Opens `client`'s session; throws `failure` if none can be had.
asio::awaitable<void> connect_zk(std::shared_ptr<zk::client> client, std::string hosts);

/// Closes the session at once, so its ephemeral nodes go now rather than at
/// expiry; errors are only logged (dlock is exiting).
asio::awaitable<void> close_zk(zk::client& client);

/// One connection per master (not connected yet), kept like the ZooKeeper client.
std::vector<std::shared_ptr<redis::connection>> make_redis_connections(asio::any_io_executor executor,
                                                                       const redis_settings& settings);

/// Connects them all at once. A single master must connect; of several
/// (Redlock's masters) a majority must. Throws `failure` otherwise. The ones
/// that failed keep reconnecting in the background.
asio::awaitable<void> connect_redis(std::vector<std::shared_ptr<redis::connection>> connections);

void close_redis(const std::vector<std::shared_ptr<redis::connection>>& connections);

}  // namespace dlock::cli
