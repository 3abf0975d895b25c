// Undoing an attempt in the background (redis::lock, redis::semaphore): a SET
// (or admit) whose answer was lost may have landed, and a handle destroyed
// while holding leaves its hold to be released. Compare-and-delete, so only
// ever our own token.
#include "lock_state.hpp"

#include <dlock/error.hpp>

#include <boost/asio/bind_executor.hpp>

namespace dlock::redis::detail {

bool not_run(error_code ec) { return ec == redis::error::script_not_run || ec == redis::error::no_script; }

namespace {

// Sent again when the server did not run it, and after a reconnection when
// the connection was down, until the key has surely expired (`give_up`).
struct cleanup_reply {
  std::shared_ptr<lock_state> s;
  std::string token;
  steady_time give_up;
  int sends = 1;
  void operator()(error_code ec, reply);
};

void send_cleanup(cleanup_reply c) {
  ++c.s->cleanups_in_flight;
  auto& conn = *c.s->conn;
  auto command = c.s->commands.release(c.token);  // before `c` is moved
  connection_access::submit(conn, std::move(command), std::move(c));
}

// Waits on the connection (which completes the wait when it is back, or
// closed) rather than polling it.
void resend_when_connected(cleanup_reply c) {
  auto conn = c.s->conn;
  auto executor = c.s->executor;
  auto resend = [c = std::move(c)](error_code ec) mutable {
    if (ec || steady_clock::now() >= c.give_up) return;
    ++c.sends;
    send_cleanup(std::move(c));
  };
  conn->wait_for(connection_state::connected, asio::bind_executor(executor, std::move(resend)));
}

void cleanup_answered(const std::shared_ptr<lock_state>& s) {
  if (--s->cleanups_in_flight > 0) return;
  resume_waiting(s);
}

void cleanup_reply::operator()(error_code ec, reply) {
  auto state = s;  // *this may be moved on
  bool again = sends < max_cleanup_sends && steady_clock::now() < give_up;
  if (again && not_run(ec)) {
    ++sends;
    send_cleanup(std::move(*this));  // still in flight: a waiting acquire keeps waiting
  } else if (again && ec == dlock::condition::connection_lost) {
    resend_when_connected(std::move(*this));  // decided by the error, not by the state seen now
  }
  cleanup_answered(state);
}

}  // namespace

void start_cleanup(const std::shared_ptr<lock_state>& s, std::string token) {
  send_cleanup(cleanup_reply{s, std::move(token), steady_clock::now() + s->opts.ttl});
}

}  // namespace dlock::redis::detail
