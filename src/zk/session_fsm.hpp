// The session state as the client reports it, from what the C client says.
// Pure logic: no I/O, unit-tested on its own.
#pragma once

#include <dlock/zk/types.hpp>

#include <chrono>
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
  /// Disconnected until the servers may have expired the session
  /// (`expiry_bound::lost_at`), so its ephemerals cannot be vouched for.
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

/// The earliest moment the servers may expire the session, from what the
/// client heard (safety review F7).
///
/// A server counts the timeout T from the last packet it received from the
/// session, and expires it no earlier than that plus T (it rounds the expiry
/// up to its next tick; a follower passes its clients' packets on to the
/// leader later still, which only moves the leader's expiry later). The client
/// cannot see that moment, only bound it from below: a reply proves the server
/// read the request it answers, hence read something no earlier than the
/// request was sent. So a reply to one of our requests counts from the
/// request's send time. A frame that answers nothing of ours (a ping's reply,
/// the handshake) counts from when it arrived: the server read the ping at
/// most one server turn and one network hop earlier (nothing of ours is queued
/// before a ping: the C client pings only when no request is outstanding).
/// Notifications count for nothing: the server sends them without hearing
/// from us. `margin` (T/10) covers that hop, the timer's and the loss
/// handler's lateness, and clock rate differences.
struct expiry_bound {
  using clock = std::chrono::steady_clock;

  /// A lower bound of the servers' last receipt from this session.
  clock::time_point last_heard{};

  /// The servers read something from us at or after `since`.
  void heard(clock::time_point since) noexcept {
    if (since > last_heard) last_heard = since;
  }
  /// When to report the session lost if nothing is heard meanwhile.
  clock::time_point lost_at(std::chrono::milliseconds timeout) const noexcept {
    return last_heard + timeout - margin(timeout);
  }
  static std::chrono::milliseconds margin(std::chrono::milliseconds timeout) noexcept { return timeout / 10; }
};

}  // namespace dlock::zk::detail
