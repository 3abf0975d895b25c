// The session's close protocol: probe a server, send CLOSE on the C client's
// connection, await the server's end of it, then close the zhandle without
// letting zookeeper_close block (see close()).
#include "session.hpp"

#include <dlock/error.hpp>
#include <dlock/log.hpp>

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cerrno>
#include <sys/socket.h>

namespace dlock::zk::detail {

using std::chrono::milliseconds;

// zookeeper_close (ST) sends CLOSE and then blocks in poll() up to 3 s + 1.5 s
// waiting for the server, holding the process-wide C client mutex, so every
// session of the process would stall with it (safety review F12d). So it is
// never given a live connection: the socket is shut down first, its send
// fails at once and nothing blocks. The CLOSE is sent here instead, once a
// server just answered a probe (a probe whose connection dropped is sent
// again once the C client reconnects, within the same limit, so a blip does
// not leave the session to expire), and the end of the connection is awaited
// on the strand: the server closes it once the session is gone. Without an
// answer within the limit, the servers expire the session (and its
// ephemerals) after the session timeout.
void session::close(pending_ptr<> op) {
  if (close_phase_ == close_phase::done) return op->complete({});
  close_waiters_.push_back(std::move(op));
  if (closing_) return;
  closing_ = true;
  lost_timer_.cancel();
  complete_connect_waiters(make_error_code(dlock::error::closed));
  if (!zh_ || zoo_state(zh_) != ZOO_CONNECTED_STATE) return finish_close();
  close_phase_ = close_phase::probing;
  send_close_probe();
  if (close_phase_ != close_phase::probing) return;
  auto limit = std::min<milliseconds>(milliseconds(1000), negotiated_timeout() / 3);
  close_timer_.expires_after(limit);
  close_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec) self->finish_close();
  });
}

void session::send_close_probe() {
  reprobe_when_connected_ = false;
  int rc;
  {
    c_call_guard guard;
    rc = zoo_aexists(zh_, "/", 0, &session::on_close_probe, this);
  }
  if (rc != ZOK) return finish_close();
  request_sent();
}

void session::on_close_probe(int rc, const Stat*, const void* context) {
  auto* self = const_cast<session*>(static_cast<const session*>(context));
  ++self->frames_explained_;
  if (self->close_phase_ != close_phase::probing) return;
  // The connection dropped under the probe. The C client reconnects at once
  // (another member, or the same after a blip): a server that answers again
  // within the close's limit can still end the session, and its ephemerals,
  // now rather than a session timeout later.
  if (lost_with_the_connection(rc)) {
    self->reprobe_when_connected_ = true;
    return;
  }
  if (rc != ZOK) return;
  asio::post(self->strand_, [s = self->shared_from_this()] { s->send_close_request(); });
}

// Writes ZooKeeper's CLOSE request (length 8, then xid and opcode -11, big
// endian) on the C client's connection, once the C client has nothing queued
// (else the frame would land inside one of its own), and stops driving the C
// client: what the server sends now is never read by it.
void session::send_close_request() {
  if (close_phase_ != close_phase::probing || !zh_) return;
  int fd = -1, interest = 0, rc, state;
  timeval tv{};
  {
    c_call_guard guard;
    rc = zookeeper_interest(zh_, &fd, &interest, &tv);
    state = zoo_state(zh_);
  }
  if (rc != ZOK || state != ZOO_CONNECTED_STATE || (interest & ZOOKEEPER_WRITE) || fd < 0) return finish_close();
  sync_descriptor(fd);
  if (!socket_is_current()) return finish_close();
  close_phase_ = close_phase::closing;
  stop_driver_waits();  // what the server sends now is never given to the C client
  const unsigned char frame[12] = {0, 0, 0, 8, 0x7f, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xf5};
  if (::send(socket_.native_handle(), frame, sizeof frame, MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof frame)
    return finish_close();
  await_server_close();
}

// Reads and drops what comes until the server ends the connection.
void session::await_server_close() {
  socket_.async_wait(asio::posix::descriptor_base::wait_read,
                     [self = shared_from_this(), generation = socket_generation_](error_code ec) {
                       if (generation != self->socket_generation_ || ec) return;
                       char dropped[512];
                       for (;;) {
                         auto n = ::recv(self->socket_.native_handle(), dropped, sizeof dropped, MSG_DONTWAIT);
                         if (n > 0) continue;
                         if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return self->await_server_close();
                         return self->finish_close();  // the end of the connection, or an error
                       }
                     });
}

// zookeeper_close sends (and then waits) only on a connection it believes up.
void session::shut_c_socket() {
  int state = zoo_state(zh_);
  if (state != ZOO_CONNECTED_STATE && state != ZOO_READONLY_STATE) return;
  if (!socket_is_current() && close_phase_ != close_phase::closing) {
    // Our copy went stale (the C client replaced its socket since the last step): ask again.
    int fd = -1, interest = 0;
    timeval tv{};
    {
      c_call_guard guard;
      zookeeper_interest(zh_, &fd, &interest, &tv);
      state = zoo_state(zh_);
    }
    if (state != ZOO_CONNECTED_STATE && state != ZOO_READONLY_STATE) return;
    if (fd >= 0) sync_descriptor(fd);
  }
  if (socket_is_current()) ::shutdown(socket_.native_handle(), SHUT_RDWR);
  else dlock::detail::log(log_level::warning, "zk: the connection to shut before closing is unknown: the close may block");
}

void session::finish_close() {
  if (close_phase_ == close_phase::done) return;
  if (zh_) shut_c_socket();
  close_phase_ = close_phase::done;
  close_timer_.cancel();
  if (zh_) release_handle(make_error_code(dlock::error::closed));
  if (fsm_.on_closed()) set_state_changed();
  report_states();
  auto waiters = std::move(close_waiters_);
  close_waiters_.clear();
  for (auto& w : waiters) w->complete({});
}

}  // namespace dlock::zk::detail
