#include "hold_monitor.hpp"

#include <dlock/zk/error.hpp>

#include <boost/asio/error.hpp>

#include <unistd.h>

namespace dlock::zk::detail {

void hold_monitor::stop_monitor_and_acquire() {
  closed = true;
  monitor_stop.emit(asio::cancellation_type::terminal);
  if (auto op = current.lock()) op->cancel(asio::error::operation_aborted);
}

error_code session_loss(const client& zk, error_code ec, session_state state, std::optional<std::int64_t> owner,
                        loss_policy policy) {
  if (ec == dlock::error::closed || state == session_state::closed) return make_error_code(dlock::error::closed);
  if (ec) return {};  // the wait failed otherwise (cancelled): no verdict
  if (state == session_state::lost || (owner && zk.session_id() != *owner))
    return make_error_code(zk::error::session_expired);
  if (state == session_state::suspended && policy == loss_policy::standard)
    return make_error_code(zk::error::connection_loss);
  return {};
}

std::string default_identifier() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host) + ":" + std::to_string(getpid());
}

}  // namespace dlock::zk::detail
