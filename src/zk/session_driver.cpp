// The session's poll driver: zookeeper_interest says which socket, which
// readiness and when to call again; Asio waits on a dup() of that socket and
// on a timer, and zookeeper_process runs on readiness. All on the strand.
#include "session.hpp"

#include <boost/asio/post.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dlock::zk::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Replies handled per readiness before giving other work a turn.
constexpr int max_replies_per_drain = 64;

void session::request_sent() {
  requests_sent_.fetch_add(1, std::memory_order_relaxed);
  step_soon();
}

// A step from the queue (one at a time): the C client has something to send.
void session::step_soon() {
  if (kick_pending_) return;
  kick_pending_ = true;
  asio::post(strand_, [self = shared_from_this()] {
    self->kick_pending_ = false;
    self->step();
  });
}

namespace {

// The step after a drain, which re-arms the socket's waits, must come even
// when a handler the drain ran in place throws (Asio lets the exception leave
// run(), and the application may call run() again): else nothing would read
// the session's socket until the timer's next step, replies and watch events
// waiting meanwhile. It is queued, not taken while the exception unwinds.
class step_after_throw {
 public:
  explicit step_after_throw(session& s) noexcept : s_(s) {}
  ~step_after_throw() {
    if (finished_) return;
    try {
      s_.step_soon();
    } catch (...) {  // nothing can be queued (no memory): the timer's step re-arms them
    }
  }
  step_after_throw(const step_after_throw&) = delete;
  step_after_throw& operator=(const step_after_throw&) = delete;
  void finished() noexcept { finished_ = true; }

 private:
  session& s_;
  bool finished_ = false;
};

}  // namespace

void session::step() {
  if (!zh_ || close_phase_ == close_phase::closing) return;
  int fd = -1, interest = 0;
  timeval tv{};
  int rc, state;
  {
    c_call_guard guard;
    rc = zookeeper_interest(zh_, &fd, &interest, &tv);
    state = zoo_state(zh_);
  }
  after_c_calls();
  if (!zh_) return;
  if (rc == ZINVALIDSTATE) {
    handle_dead_ = true;
    return after_c_calls();
  }
  // The C client replaces its socket only by way of a connecting state,
  // which a step always sees: while it stays connected on the same fd
  // number, the socket is the same one and needs no fstat.
  bool same_socket = socket_.is_open() && connected_at_last_step_ && state == ZOO_CONNECTED_STATE &&
                     fd == socket_fd_number_;
  connected_at_last_step_ = state == ZOO_CONNECTED_STATE;
  if (!same_socket) sync_descriptor(fd);
  if (socket_.is_open()) {
    // While connecting, only write readiness (the connect finished, or
    // failed: errors complete a write wait too) may drive the C client. A
    // read-only zookeeper_process then would allocate its input buffer, find
    // no data, and keep the buffer, which prime_connection overwrites without
    // freeing (a leak in the C client, 3.8.0 and later).
    if (state != ZOO_CONNECTING_STATE) arm_read();
    if ((interest & ZOOKEEPER_WRITE) && !(state == ZOO_CONNECTED_STATE && sent_without_waiting())) arm_write();
  }
  auto delay = std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec);
  // A failed interest call (e.g. no server answered) must not spin.
  if (rc != ZOK && delay < milliseconds(50)) delay = milliseconds(50);
  arm_timer(delay);
}

void session::drain(int events) {
  if (close_phase_ == close_phase::closing) return;
  completion_batch replies;  // delivered below, outside the C calls
  for (int i = 0; i < max_replies_per_drain && zh_; ++i) {
    int rc;
    auto explained = frames_explained_;
    {
      c_call_guard guard;
      // A stale read readiness while connecting (see step): not for this socket.
      if (!(events & ZOOKEEPER_WRITE) && zoo_state(zh_) == ZOO_CONNECTING_STATE) break;
      rc = zookeeper_process(zh_, events);
    }
    // A frame read (ZOK with READ) that ran no completion and no watch
    // answered something the C client sent by itself: a ping, most often.
    if (rc == ZOK && (events & ZOOKEEPER_READ) && explained == frames_explained_) expiry_.heard(steady_clock::now());
    events = ZOOKEEPER_READ;
    // ZINVALIDSTATE also means "no socket" (a readiness of the socket the C
    // client just closed): the handle is dead only in an unrecoverable state.
    if (rc == ZINVALIDSTATE && zoo_state(zh_) < 0) handle_dead_ = true;
    if (rc != ZOK) break;  // ZNOTHING, or an error after which the C client closed the socket
  }
  after_c_calls();
  step_after_throw guard(*this);
  replies.run();
  guard.finished();
}

// What the driver waits for ends here: the waits armed before see a new generation.
void session::stop_driver_waits() {
  ++socket_generation_;
  read_armed_ = write_armed_ = false;
  timer_.cancel();
  timer_armed_ = false;
  ++timer_generation_;
}

void session::drop_socket() {
  if (!socket_.is_open()) return;
  error_code ignored;
  socket_.close(ignored);
  ++socket_generation_;
  read_armed_ = write_armed_ = false;
}

void session::sync_descriptor(int fd) {
  if (fd < 0) return drop_socket();
  struct ::stat st {};
  // The C client may have closed that socket and reported its old number:
  // drop our copy of it, so no stale readiness reaches the C client.
  if (::fstat(fd, &st) != 0) return drop_socket();
  if (socket_.is_open() && st.st_dev == socket_dev_ && st.st_ino == socket_ino_) return;
  error_code ec;
  if (socket_.is_open()) socket_.close(ec);
  ++socket_generation_;
  read_armed_ = write_armed_ = false;
  // The C client opens its socket without close-on-exec: a child the program
  // execs must not inherit the session's connection.
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return;
  socket_.assign(copy, ec);
  if (ec) {
    ::close(copy);
    return;
  }
  socket_dev_ = st.st_dev;
  socket_ino_ = st.st_ino;
  socket_fd_number_ = fd;
}

void session::arm_read() {
  arm_readiness(asio::posix::descriptor_base::wait_read, &session::read_armed_, ZOOKEEPER_READ);
}

void session::arm_write() {
  arm_readiness(asio::posix::descriptor_base::wait_write, &session::write_armed_, ZOOKEEPER_WRITE);
}

// A connected socket nearly always takes a request's bytes at once: send them
// now rather than wait for a write readiness that is already there (each wait
// costs the reactor an epoll_ctl and a wake-up; the C loop polls once for
// both). What the socket does not take waits for readiness as before. Only
// WRITE: the C client reads nothing and runs no completion here (any it
// did would be posted by the batch).
bool session::sent_without_waiting() {
  if (write_armed_) return false;  // a wait is pending already: it will send
  completion_batch none_expected;
  int rc, fd = -1, interest = 0;
  timeval tv{};
  {
    c_call_guard guard;
    rc = zookeeper_process(zh_, ZOOKEEPER_WRITE);
    if (rc == ZOK) zookeeper_interest(zh_, &fd, &interest, &tv);
    else if (rc == ZINVALIDSTATE && zoo_state(zh_) < 0) handle_dead_ = true;
  }
  after_c_calls();
  if (rc == ZOK) return !(interest & ZOOKEEPER_WRITE);
  step_soon();  // the send failed and the C client closed its socket: the next step sees it
  return true;
}

// One wait per direction at a time; a wait on a socket copy since replaced
// (an older generation) is ignored.
void session::arm_readiness(asio::posix::descriptor_base::wait_type wait, bool session::*armed, int events) {
  if (this->*armed) return;
  this->*armed = true;
  socket_.async_wait(wait, [self = shared_from_this(), armed, events, generation = socket_generation_](error_code ec) {
    if (generation != self->socket_generation_) return;
    self.get()->*armed = false;
    if (ec) return;
    self->drain(events);
    self->step();
  });
}

void session::arm_timer(steady_clock::duration delay) {
  auto deadline = steady_clock::now() + delay;
  // An earlier pending expiry only calls zookeeper_interest sooner: keep it
  // rather than re-arm on every step.
  if (timer_armed_ && timer_deadline_ <= deadline) return;
  timer_armed_ = true;
  timer_deadline_ = deadline;
  timer_.expires_at(deadline);
  timer_.async_wait([self = shared_from_this(), generation = ++timer_generation_](error_code ec) {
    if (generation != self->timer_generation_) return;
    self->timer_armed_ = false;
    if (!ec) self->step();
  });
}

// Our dup is the C client's socket: its fd still names the same socket.
bool session::socket_is_current() const {
  if (!socket_.is_open() || socket_fd_number_ < 0) return false;
  struct ::stat st {};
  if (::fstat(socket_fd_number_, &st) != 0) return false;
  return st.st_dev == socket_dev_ && st.st_ino == socket_ino_;
}

}  // namespace dlock::zk::detail
