/// @file
/// How a Redis connection reaches and greets its server.
#pragma once

#include <dlock/observer.hpp>
#include <dlock/stall_monitor.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dlock::redis {

/// TLS settings of a connection.
///
/// TLS through asio::ssl (OpenSSL). Redis serves it on its own port
/// (`tls-port`), so `options::port` must name that one.
struct tls_options {
  bool enabled = false;  ///< connect with TLS

  /// PEM file of the CA(s) the server's certificate is checked against;
  /// empty: the system's default trust store.
  std::string ca_file;
  /// A client certificate and its key (PEM), for a server that asks for one
  /// (`tls-auth-clients yes`); empty: none.
  std::string cert_file;
  std::string key_file;  ///< the key of `cert_file` (PEM)

  /// The name the server's certificate must carry (DNS name or IP address),
  /// also sent as SNI when it is a name; empty: `options::host`.
  std::string server_name;
  /// False accepts any certificate: anyone in the path can then pose as the
  /// server. For tests only.
  bool verify_peer = true;
};

/// A server's name or address and its port.
struct server_address {
  std::string host;        ///< name or address
  std::uint16_t port = 0;  ///< its port
};

/// Sentinel discovery: the master is whichever server the sentinels name,
/// and follows their failovers. Off while `master_name` is empty.
///
/// The connection asks the sentinels in turn (`SENTINEL
/// GET-MASTER-ADDR-BY-NAME`), checks that the server they name says it is a
/// master (`INFO replication`), and stays subscribed to `+switch-master` on
/// the sentinel that answered. A failover (that message, a reconnect that
/// finds another replication history, or a `READONLY` answer) ends the
/// session and every lock held on the old master is lost with
/// dlock::error::failed_over before any command reaches the new one.
struct sentinel_options {
  /// The sentinels to ask, in order (the one that answered last is asked first).
  std::vector<server_address> sentinels;
  /// The name the sentinels monitor the master under.
  std::string master_name;
  /// AUTH for the sentinels (as `options::username`); empty: none.
  std::string username;
  std::string password;  ///< AUTH password for the sentinels; empty: no AUTH
  tls_options tls;       ///< TLS to the sentinels (the master's is `options::tls`)
};

/// How a `redis::connection` reaches its server and what it sends first.
struct options {
  std::string host = "127.0.0.1";  ///< name or address of the server
  std::uint16_t port = 6379;        ///< its port (the TLS port with `tls`)

  /// AUTH: `username` empty means the default user (`AUTH password`);
  /// `password` empty means no AUTH.
  std::string username;
  std::string password;  ///< AUTH password (see `username`)

  /// SELECT, skipped when 0.
  int database = 0;
  /// CLIENT SETNAME, skipped when empty.
  std::string client_name;

  /// Resolve + connect + handshake must finish within this.
  std::chrono::milliseconds connect_timeout{2000};
  /// A command with no reply after this completes with redis::error::timed_out
  /// (its late reply is read and dropped). Zero: no timeout.
  std::chrono::milliseconds command_timeout{2000};
  /// After a loss, reconnect after a delay that doubles from min to max
  /// (with jitter), reset after a successful connect. With `reconnect`,
  /// min must be positive and max at least min: connect() refuses them with
  /// dlock::error::invalid_argument otherwise.
  std::chrono::milliseconds reconnect_min{50};
  std::chrono::milliseconds reconnect_max{2000};  ///< the longest reconnect delay (see `reconnect_min`)

  /// False: after the first loss the connection stays closed.
  bool reconnect = true;
  /// Off by default. A failed handshake fails `connect()` with the TLS
  /// error (e.g. "certificate verify failed").
  tls_options tls;
  /// Told of the connection's state changes and, unless a lock has its own, of
  /// the events of every lock on it (dlock/observer.hpp). None by default.
  std::shared_ptr<dlock::observer> observer{};
  /// Stall detection for every lock on this connection: a hold keeps the
  /// lateness it saw as a margin, and a stall that leaves it less validity than
  /// the stall lasted loses it (dlock/stall_monitor.hpp). None by default.
  std::shared_ptr<dlock::stall_monitor> stall{};
  /// Sentinel discovery: with a `master_name`, `host` and `port` are not
  /// used; the sentinels name the master. Off by default.
  sentinel_options sentinel;
};

}  // namespace dlock::redis
