/// @file
/// Values the ZooKeeper client hands back: node metadata, create modes,
/// session states, watch events and counters.
#pragma once

#include <dlock/detail/require_cxx20.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::zk {

/// A node's metadata (ZooKeeper's `Stat`).
struct stat {
  std::int64_t czxid = 0;            ///< transaction that created the node
  std::int64_t mzxid = 0;            ///< transaction that last changed its data
  std::int64_t pzxid = 0;            ///< transaction that last changed its children
  std::int64_t ctime = 0;            ///< creation time, ms since the epoch
  std::int64_t mtime = 0;            ///< last data change, ms since the epoch
  std::int32_t version = 0;          ///< data version (for conditional set/remove)
  std::int32_t cversion = 0;         ///< children version
  std::int32_t aversion = 0;         ///< ACL version
  std::int64_t ephemeral_owner = 0;  ///< owning session id if ephemeral, else 0
  std::int32_t data_length = 0;      ///< bytes of data
  std::int32_t num_children = 0;     ///< number of children
};

/// What kind of node `client::create` makes.
enum class create_mode {
  persistent,             ///< stays until deleted
  ephemeral,              ///< removed when the creating session ends
  persistent_sequential,  ///< the server appends a 10-digit counter to the name
  ephemeral_sequential,   ///< ephemeral, with the sequence counter
  container,              ///< removed by the server once its last child is gone
};

/// What `create` returns: the path actually created (with the sequence
/// suffix, without the chroot) and its metadata.
struct created {
  std::string path;  ///< the node created
  zk::stat stat;     ///< its metadata
};

/// The session as the client can vouch for it (Curator's vocabulary).
enum class session_state {
  connecting,   ///< no session yet (before the first connection)
  connected,    ///< a new session is established (the first, or a fresh one after `lost`)
  suspended,    ///< the connection dropped; the session may still live on the servers
  reconnected,  ///< the same session is back after `suspended` or `lost`: its ephemerals and watches survive
  lost,         ///< expired, or disconnected longer than the session timeout: ephemerals cannot be vouched for
  closed,       ///< `close()` was called or the client was destroyed
};

/// The state's name ("connected", ...), for logs.
std::string_view to_string(session_state state) noexcept;

/// What a watch saw happen.
enum class watch_event_type {
  created,           ///< the node was created (an `exists` watch on a missing node)
  deleted,           ///< the node was deleted
  data_changed,      ///< the node's data was set
  children_changed,  ///< a child was created or deleted
};

/// The event type's name ("deleted", ...), for logs.
std::string_view to_string(watch_event_type type) noexcept;

/// A fired watch: what happened, to which node.
struct watch_event {
  watch_event_type type = watch_event_type::data_changed;  ///< what happened
  std::string path;  ///< the watched path (without the chroot)
};

/// Counters readable at any time (from the client's executor).
struct statistics {
  std::uint64_t requests_sent = 0;           ///< requests handed to the C client
  std::uint64_t replies_received = 0;        ///< replies (including abandoned ones)
  std::uint64_t watch_events_delivered = 0;  ///< watch events that reached a `zk::watch`
  std::uint64_t sessions_opened = 0;         ///< sessions established (first + fresh after expiry)
  std::uint64_t reconnections = 0;           ///< same-session reconnections
};

}  // namespace dlock::zk
