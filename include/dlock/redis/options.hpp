/// @file
/// How a Redis connection reaches and greets its server.
#pragma once

#include <dlock/observer.hpp>
#include <dlock/stall_monitor.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

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
};

}  // namespace dlock::redis
