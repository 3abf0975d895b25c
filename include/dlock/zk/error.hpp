/// @file
/// Every return code of the ZooKeeper C client, as an error_code.
/// Values equal the C client's codes (ZNONODE == -101 ...).
#pragma once

#include <dlock/config.hpp>

#include <type_traits>

namespace dlock::zk {

/// The ZooKeeper C client's return codes (`ZSYSTEMERROR`...), category
/// `dlock::zk::error_category()`.
enum class error {
  system_error = -1,           ///< ZSYSTEMERROR: a system call failed
  runtime_inconsistency = -2,  ///< ZRUNTIMEINCONSISTENCY: a transaction operation not attempted
  data_inconsistency = -3,     ///< ZDATAINCONSISTENCY
  connection_loss = -4,  ///< the connection dropped; the request's outcome is unknown, the session may live
  marshalling_error = -5,  ///< ZMARSHALLINGERROR: a request or reply could not be encoded or decoded
  unimplemented = -6,      ///< ZUNIMPLEMENTED: the server does not know the operation
  operation_timeout = -7,  ///< ZOPERATIONTIMEOUT
  bad_arguments = -8,      ///< ZBADARGUMENTS: the C client refused the arguments
  invalid_state = -9,  ///< the handle is unusable (expired, auth failed, or not connected yet)
  new_config_no_quorum = -13,  ///< ZNEWCONFIGNOQUORUM: a reconfiguration found no quorum
  reconfig_in_progress = -14,  ///< ZRECONFIGINPROGRESS
  ssl_connection_error = -15,  ///< ZSSLCONNECTIONERROR
  api_error = -100,            ///< ZAPIERROR: a server-side error with no code of its own
  no_node = -101,              ///< ZNONODE: the node does not exist
  no_auth = -102,              ///< ZNOAUTH: the node's ACL does not allow the operation
  bad_version = -103,          ///< ZBADVERSION: the node's version is not the one given
  no_children_for_ephemerals = -108,  ///< ZNOCHILDRENFOREPHEMERALS: ephemeral nodes cannot have children
  node_exists = -110,          ///< ZNODEEXISTS: the node already exists
  not_empty = -111,            ///< ZNOTEMPTY: the node has children
  session_expired = -112,  ///< the servers expired the session: its ephemerals and watches are gone
  invalid_callback = -113,     ///< ZINVALIDCALLBACK
  invalid_acl = -114,          ///< ZINVALIDACL: the ACL is malformed
  auth_failed = -115,          ///< ZAUTHFAILED: the credentials were refused
  closing = -116,              ///< ZCLOSING: the handle is being closed
  nothing = -117,              ///< ZNOTHING: no server responses to process
  session_moved = -118,        ///< ZSESSIONMOVED: the session moved to another server
  not_read_only = -119,        ///< ZNOTREADONLY: a write on a read-only server
  ephemeral_on_local_session = -120,  ///< ZEPHEMERALONLOCALSESSION
  no_watcher = -121,           ///< ZNOWATCHER: no such watch to remove
  reconfig_disabled = -123,    ///< ZRECONFIGDISABLED
  session_closed_requires_sasl_auth = -124,  ///< ZSESSIONCLOSEDREQUIRESASLAUTH
  throttled_op = -127,         ///< ZTHROTTLEDOP: the server throttled the request
};

/// The category of `zk::error` (name "dlock.zk").
const boost::system::error_category& error_category() noexcept;

/// Makes `zk::error` values convertible to `error_code`.
inline error_code make_error_code(error e) noexcept {
  return error_code(static_cast<int>(e), error_category());
}

/// The error_code for a C client return code (ZOK gives an empty one).
error_code make_error_code_from_c(int rc) noexcept;

}  // namespace dlock::zk

/// @cond
template <>
struct boost::system::is_error_code_enum<dlock::zk::error> : std::true_type {};
/// @endcond
