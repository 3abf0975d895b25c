#include "zk/recipe/grant_doubt.hpp"

namespace dlock::zk::detail {

error_code grant_doubt(const client& zk, std::optional<std::int64_t> owner) {
  auto now = zk.state();
  if (now == session_state::closed) return dlock::error::closed;
  if (now == session_state::lost || (owner && zk.session_id() != *owner)) return zk::error::session_expired;
  if (!session_vouched_for(zk)) return dlock::error::expired;
  return {};
}

}  // namespace dlock::zk::detail
