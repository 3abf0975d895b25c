/// @file
/// Failures of the Redis backend: the connection, the server, the protocol.
/// Lock outcomes (taken, not_owned, ...) use dlock::error.
#pragma once

#include <dlock/config.hpp>

#include <type_traits>

namespace dlock::redis {

/// Failures of a Redis connection or server (category `dlock::redis::error_category()`).
enum class error {
  server_error = 1,   ///< the server answered with an error reply (message in the reply)
  no_script,          ///< NOSCRIPT: the script is not in the server's cache
  wrong_type,         ///< WRONGTYPE: the key holds another type
  auth_failed,        ///< WRONGPASS / NOAUTH / NOPERM during the handshake or a command
  busy,               ///< BUSY / LOADING / MASTERDOWN: the server cannot serve now
  not_connected,      ///< issued while the connection is down (it reconnects on its own)
  connection_lost,    ///< the connection broke before the reply arrived
  timed_out,          ///< no reply within the per-command timeout (or connect timeout)
  protocol_error,     ///< the byte stream is not valid RESP

  /// A script command was not run: the server's script cache was flushed
  /// (SCRIPT FLUSH, a restart behind a proxy, a failover) and commands issued
  /// after it were already sent, so running it now would run it after them.
  /// Nothing was done; issue it again (it then goes as EVAL).
  script_not_run,

  /// READONLY: the server is a replica now (a failover demoted it).
  read_only,
  /// Sentinel discovery: no sentinel answered.
  sentinels_unreachable,
  /// Sentinel discovery: the sentinels that answered monitor no master by that name.
  master_unknown,
  /// Sentinel discovery: the server the sentinels named is not a master (yet, or any more).
  not_master,
};

/// The category of `redis::error` (name "dlock.redis").
const boost::system::error_category& error_category() noexcept;

/// Makes `redis::error` values convertible to `error_code`.
inline error_code make_error_code(error e) noexcept {
  return error_code(static_cast<int>(e), error_category());
}

}  // namespace dlock::redis

/// @cond
template <>
struct boost::system::is_error_code_enum<dlock::redis::error> : std::true_type {};
/// @endcond
