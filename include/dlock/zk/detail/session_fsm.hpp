// The session state as the client reports it, from what the C client says.
// Pure logic: no I/O, unit-tested on its own.
#pragma once

#include <dlock/zk/types.hpp>

#include <cstdint>

namespace dlock::zk::detail {

/// Each `on_*` returns true when `state` changed.
struct session_fsm {
  session_state state = session_state::connecting;
  std::int64_t session_id = 0;  ///< the last session established
  bool ever_connected = false;

  /// A session is established. The same id as before means it survived.
  bool on_connected(std::int64_t id) noexcept {
    if (state == session_state::closed) return false;
    bool same = ever_connected && id == session_id;
    if (same && (state == session_state::connected || state == session_state::reconnected)) return false;
    ever_connected = true;
    session_id = id;
    return set(same ? session_state::reconnected : session_state::connected);
  }
  /// The connection dropped (the C client is reconnecting).
  bool on_disconnected() noexcept {
    if (state == session_state::connected || state == session_state::reconnected)
      return set(session_state::suspended);
    return false;
  }
  /// The servers expired the session (or refused its credentials).
  bool on_expired() noexcept {
    if (state == session_state::closed) return false;
    return set(session_state::lost);
  }
  /// Disconnected for longer than the negotiated session timeout: the servers
  /// may have expired the session, so its ephemerals cannot be vouched for.
  bool on_disconnect_timeout() noexcept {
    if (state != session_state::suspended) return false;
    return set(session_state::lost);
  }
  bool on_closed() noexcept { return set(session_state::closed); }

 private:
  bool set(session_state s) noexcept {
    if (s == state) return false;
    state = s;
    return true;
  }
};

}  // namespace dlock::zk::detail
