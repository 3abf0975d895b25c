#include <dlock/zk/error.hpp>

#include <string>

namespace dlock::zk {
namespace {

const char* describe(error e) noexcept {
  switch (e) {
    case error::system_error: return "system error in the ZooKeeper client (see errno)";
    case error::runtime_inconsistency: return "runtime inconsistency in the ZooKeeper client";
    case error::data_inconsistency: return "data inconsistency in the ZooKeeper client";
    case error::connection_loss: return "connection to ZooKeeper lost; the request's outcome is unknown (the session may still live)";
    case error::marshalling_error: return "error while encoding or decoding a ZooKeeper request";
    case error::unimplemented: return "operation not implemented by the ZooKeeper server";
    case error::operation_timeout: return "ZooKeeper operation timed out";
    case error::bad_arguments: return "invalid arguments for the ZooKeeper client";
    case error::invalid_state: return "the ZooKeeper handle is not usable (not connected yet, expired or failed authentication)";
    case error::new_config_no_quorum: return "no quorum of the new ZooKeeper configuration is connected and up to date";
    case error::reconfig_in_progress: return "another ZooKeeper reconfiguration is in progress";
    case error::ssl_connection_error: return "SSL connection error";
    case error::api_error: return "ZooKeeper API error";
    case error::no_node: return "the node does not exist";
    case error::no_auth: return "not authorized for this node (ACL)";
    case error::bad_version: return "the node's version does not match (it was changed meanwhile)";
    case error::no_children_for_ephemerals: return "ephemeral nodes cannot have children";
    case error::node_exists: return "the node already exists";
    case error::not_empty: return "the node has children";
    case error::session_expired: return "the ZooKeeper session expired: its ephemeral nodes and watches are gone";
    case error::invalid_callback: return "invalid callback given to the ZooKeeper client";
    case error::invalid_acl: return "invalid ACL";
    case error::auth_failed: return "ZooKeeper authentication failed";
    case error::closing: return "the ZooKeeper client is closing";
    case error::nothing: return "no server response to process (not an error)";
    case error::session_moved: return "the session moved to another server; the request was ignored";
    case error::not_read_only: return "a write was sent to a read-only server";
    case error::ephemeral_on_local_session: return "ephemeral nodes cannot be created on a local session";
    case error::no_watcher: return "no such watch";
    case error::reconfig_disabled: return "ZooKeeper reconfiguration is disabled";
    case error::session_closed_requires_sasl_auth: return "the server closed the session: it requires SASL authentication";
    case error::throttled_op: return "the server throttled the operation; retry";
  }
  return nullptr;
}

class category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "dlock.zk"; }
  std::string message(int value) const override {
    if (const char* text = describe(static_cast<error>(value))) return text;
    return "unknown ZooKeeper error " + std::to_string(value);
  }
};

}  // namespace

const boost::system::error_category& error_category() noexcept {
  static const category instance;
  return instance;
}

error_code make_error_code_from_c(int rc) noexcept {
  if (rc == 0) return {};
  return error_code(rc, error_category());
}

}  // namespace dlock::zk
