/// @file
/// How a dlock::zk::client connects.
#pragma once

#include <dlock/observer.hpp>
#include <dlock/stall_monitor.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace dlock::zk {

/// The ACL given to nodes this client creates.
enum class acl_policy {
  open,         ///< anyone may do anything (ZOO_OPEN_ACL_UNSAFE)
  creator_all,  ///< only the creator's authenticated identity (needs `digest_auth`)
  read_only,    ///< anyone may read, nobody may change (ZOO_READ_ACL_UNSAFE)
};

/// A `digest` identity, "user:password", added with `zoo_add_auth` on connect.
struct digest_credentials {
  std::string user;      ///< the user name
  std::string password;  ///< its password
};

/// The shortest `options::session_timeout` a client accepts (100 ms): the C
/// client gives up a handshake not answered within 2/3 of the requested
/// timeout, before the servers raise it to their minimum (2 ticks), so a
/// few milliseconds would never connect. `connect()` refuses a shorter one
/// with `dlock::error::invalid_argument`.
inline constexpr std::chrono::milliseconds min_session_timeout{100};
/// The longest `options::session_timeout` a client accepts, `INT_MAX / 2` ms
/// (about 12 days; the servers lower any request to at most 20 ticks): the C
/// client keeps it in an `int` and doubles it, which overflowed beyond this,
/// so that it never connected. `connect()` refuses a longer one with
/// `dlock::error::invalid_argument`.
inline constexpr std::chrono::milliseconds max_session_timeout{std::numeric_limits<int>::max() / 2};

/// How a `zk::client` connects and what its session is like.
struct options {
  /// "host:port,host:port[/chroot]". Numeric addresses avoid DNS entirely;
  /// names are resolved once per (re)connection, never per poll.
  std::string hosts = "127.0.0.1:2181";
  /// Requested session timeout; the servers may negotiate it within
  /// [2, 20] x tickTime (see `client::negotiated_session_timeout()`).
  std::chrono::milliseconds session_timeout{10'000};
  /// Limit for `connect()` to see a session established.
  std::chrono::milliseconds connect_timeout{15'000};
  /// Identities added to each session (see `acl_policy::creator_all`).
  std::vector<digest_credentials> digest_auth;
  acl_policy default_acl = acl_policy::open;  ///< the ACL of the nodes the client creates

  /// After the session expires, open a fresh one (reported as `connected`
  /// after `lost`). When false the client stays `lost` until closed.
  bool reopen_on_expiry = true;
  /// Resume an existing session (both set) instead of creating one.
  std::int64_t session_id = 0;
  std::string session_password;  ///< see `session_id`

  /// Told of the session's state changes and, unless a recipe has its own, of
  /// the events of every lock and queue on this client (dlock/observer.hpp).
  std::shared_ptr<dlock::observer> observer{};
  /// Stall detection for every lock on this client: under
  /// `loss_policy::standard`, a stall longer than the lock's `stall_fraction`
  /// of the session timeout loses it (dlock/stall_monitor.hpp). None by default.
  std::shared_ptr<dlock::stall_monitor> stall{};
};

}  // namespace dlock::zk
