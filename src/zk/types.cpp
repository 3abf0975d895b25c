#include <dlock/zk/types.hpp>

namespace dlock::zk {

std::string_view to_string(session_state state) noexcept {
  switch (state) {
    case session_state::connecting: return "connecting";
    case session_state::connected: return "connected";
    case session_state::suspended: return "suspended";
    case session_state::reconnected: return "reconnected";
    case session_state::lost: return "lost";
    case session_state::closed: return "closed";
  }
  return "unknown";
}

std::string_view to_string(watch_event_type type) noexcept {
  switch (type) {
    case watch_event_type::created: return "created";
    case watch_event_type::deleted: return "deleted";
    case watch_event_type::data_changed: return "data_changed";
    case watch_event_type::children_changed: return "children_changed";
  }
  return "unknown";
}

}  // namespace dlock::zk
