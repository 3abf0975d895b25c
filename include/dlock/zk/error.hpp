// Every return code of the ZooKeeper C client, as an error_code.
// Values equal the C client's codes (ZNONODE == -101 ...).
#pragma once

#include <dlock/config.hpp>

#include <type_traits>

namespace dlock::zk {

enum class error {
  system_error = -1,
  runtime_inconsistency = -2,
  data_inconsistency = -3,
  connection_loss = -4,  ///< the connection dropped; the request's outcome is unknown, the session may live
  marshalling_error = -5,
  unimplemented = -6,
  operation_timeout = -7,
  bad_arguments = -8,
  invalid_state = -9,  ///< the handle is unusable (expired, auth failed, or not connected yet)
  new_config_no_quorum = -13,
  reconfig_in_progress = -14,
  ssl_connection_error = -15,
  api_error = -100,
  no_node = -101,
  no_auth = -102,
  bad_version = -103,
  no_children_for_ephemerals = -108,
  node_exists = -110,
  not_empty = -111,
  session_expired = -112,  ///< the servers expired the session: its ephemerals and watches are gone
  invalid_callback = -113,
  invalid_acl = -114,
  auth_failed = -115,
  closing = -116,
  nothing = -117,
  session_moved = -118,
  not_read_only = -119,
  ephemeral_on_local_session = -120,
  no_watcher = -121,
  reconfig_disabled = -123,
  session_closed_requires_sasl_auth = -124,
  throttled_op = -127,
};

const boost::system::error_category& error_category() noexcept;

inline error_code make_error_code(error e) noexcept {
  return error_code(static_cast<int>(e), error_category());
}

/// The error_code for a C client return code (ZOK gives an empty one).
error_code make_error_code_from_c(int rc) noexcept;

}  // namespace dlock::zk

template <>
struct boost::system::is_error_code_enum<dlock::zk::error> : std::true_type {};
