// Connecting to the servers a subcommand names.
#pragma once

#include "dlock/hosts.hpp"

#include <dlock/redis/connection.hpp>
#include <dlock/zk/client.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace dlock::cli {

/// The ZooKeeper session timeout when --session-timeout is not given ("10s").
inline constexpr std::chrono::milliseconds default_session_timeout{10'000};

/// An open ZooKeeper session to `hosts`; throws `failure` if none can be had.
/// The client lives until the io_context has drained (see keep_until_drained).
asio::awaitable<std::shared_ptr<zk::client>> connect_zk(std::string hosts,
                                                        std::chrono::milliseconds session_timeout);

/// Closes the session at once, so its ephemeral nodes go now rather than at
/// expiry; errors are only logged (dlock is exiting).
asio::awaitable<void> close_zk(zk::client& client);

/// One connection per address. A single address must connect; of several
/// (Redlock's masters) a majority must. Throws `failure` otherwise.
asio::awaitable<std::vector<std::shared_ptr<redis::connection>>> connect_redis(std::vector<host_port> addresses);

}  // namespace dlock::cli
