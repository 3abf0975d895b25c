#include "session.hpp"

#include "watch_state.hpp"

#include <dlock/error.hpp>
#include <dlock/log.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dlock::zk::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Replies handled per readiness before giving other work a turn.
constexpr int max_replies_per_drain = 64;

error_code reply_error(int rc) noexcept {
  if (rc == ZCLOSING) return make_error_code(dlock::error::closed);
  return make_error_code_from_c(rc);
}

session::session(asio::any_io_executor executor, options opts)
    : strand_(asio::make_strand(std::move(executor))),
      options_(std::move(opts)),
      socket_(strand_),
      timer_(strand_),
      connect_timer_(strand_),
      lost_timer_(strand_),
      close_timer_(strand_) {}

session::~session() {
  // Normally closed through close(); this is the last resort (no I/O left).
  if (zh_) {
    c_call_guard guard;
    zookeeper_close(zh_);
  }
}

std::string session::session_password() const {
  std::lock_guard lock(facts_mutex_);
  return password_;
}

std::string session::current_server() const {
  std::lock_guard lock(facts_mutex_);
  return server_;
}

statistics session::stats() const noexcept {
  statistics s;
  s.requests_sent = requests_sent_.load(std::memory_order_relaxed);
  s.replies_received = replies_received_.load(std::memory_order_relaxed);
  s.watch_events_delivered = watch_events_.load(std::memory_order_relaxed);
  s.sessions_opened = sessions_opened_.load(std::memory_order_relaxed);
  s.reconnections = reconnections_.load(std::memory_order_relaxed);
  return s;
}

// ---------------------------------------------------------------- opening

bool session::open_handle(error_code& ec) {
  configure_c_client_logging();
  clientid_t resume{};
  bool resuming = options_.session_id != 0 && sessions_opened_.load() == 0 && !fsm_.ever_connected;
  if (resuming) {
    resume.client_id = options_.session_id;
    std::memcpy(resume.passwd, options_.session_password.data(),
                std::min(options_.session_password.size(), sizeof(resume.passwd)));
  }
  {
    c_call_guard guard;
    zh_ = zookeeper_init2(options_.hosts.c_str(), &session::global_watcher,
                          static_cast<int>(options_.session_timeout.count()), resuming ? &resume : nullptr,
                          this, 0, &c_client_log);
    if (zh_) {
      // Resolve host names once per connection, not on every interest call.
      zoo_set_servers_resolution_delay(zh_, -1);
      for (auto& credentials : options_.digest_auth) {
        std::string identity = credentials.user + ":" + credentials.password;
        zoo_add_auth(zh_, "digest", identity.data(), static_cast<int>(identity.size()), nullptr, nullptr);
      }
    }
  }
  if (!zh_) {
    ec = make_error_code(dlock::error::invalid_argument);
    dlock::detail::log(log_level::error, "zk: cannot open a session for hosts \"" + options_.hosts + "\"");
    return false;
  }
  handle_dead_ = false;
  return true;
}

void session::connect(pending_ptr<> op) {
  if (op->done()) return;
  if (closing_) return op->complete(make_error_code(dlock::error::closed));
  auto s = fsm_.state;
  if (s == session_state::connected || s == session_state::reconnected) return op->complete({});
  if (auth_failed_) return op->complete(make_error_code(error::auth_failed));
  if (!zh_ && s == session_state::lost && !options_.reopen_on_expiry)
    return op->complete(make_error_code(error::session_expired));  // it stays lost until closed
  if (!zh_ && !fsm_.ever_connected) {
    error_code ec;
    if (!open_handle(ec)) return op->complete(ec);
    step();
  }
  connect_waiters_.push_back(op);
  // One limit for all waiting connect calls, counted from the latest.
  connect_timer_.expires_after(options_.connect_timeout);
  connect_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec) self->complete_connect_waiters(make_error_code(dlock::error::timed_out));
  });
}

void session::forget_connect_waiter(pending_base* op) {
  std::erase_if(connect_waiters_, [op](auto& w) { return w.get() == op; });
}

void session::complete_connect_waiters(error_code ec) {
  connect_timer_.cancel();
  auto waiters = std::move(connect_waiters_);
  connect_waiters_.clear();
  for (auto& w : waiters) w->complete(ec);
}

zhandle_t* session::handle_for_request(error_code& ec) const noexcept {
  if (closing_) ec = make_error_code(dlock::error::closed);
  else if (!zh_) ec = make_error_code(error::invalid_state);
  return ec ? nullptr : zh_;
}

const ACL_vector* session::default_acl() const noexcept {
  switch (options_.default_acl) {
    case acl_policy::open: return &ZOO_OPEN_ACL_UNSAFE;
    case acl_policy::creator_all: return &ZOO_CREATOR_ALL_ACL;
    case acl_policy::read_only: return &ZOO_READ_ACL_UNSAFE;
  }
  return &ZOO_OPEN_ACL_UNSAFE;
}

void session::request_sent() {
  requests_sent_.fetch_add(1, std::memory_order_relaxed);
  if (kick_pending_) return;
  kick_pending_ = true;
  asio::post(strand_, [self = shared_from_this()] {
    self->kick_pending_ = false;
    self->step();
  });
}

// ---------------------------------------------------------------- driver

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
    if (interest & ZOOKEEPER_WRITE) arm_write();
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
  replies.run();
}

// What C callbacks could only record: work that calls back into the C client.
void session::after_c_calls() {
  if (handle_dead_ && zh_) on_handle_dead();
  if (reprobe_when_connected_ && zh_ && close_phase_ == close_phase::probing && zoo_state(zh_) == ZOO_CONNECTED_STATE)
    send_close_probe();
  if (!removals_.empty() && zh_) {
    auto removals = std::move(removals_);
    removals_.clear();
    for (auto& w : removals) w->remove_from_c_client(zh_);
  }
  if (!orphans_.empty() && zh_) {
    auto orphans = std::move(orphans_);
    orphans_.clear();
    for (auto& path : orphans) {
      int rc;
      {
        c_call_guard guard;
        rc = zoo_adelete(zh_, path.c_str(), -1, &session::on_orphan_removed, this);
      }
      if (rc == ZOK) request_sent();
      dlock::detail::log(log_level::debug, "zk: removing " + path + ", created by a cancelled create");
    }
  }
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
  if (read_armed_) return;
  read_armed_ = true;
  socket_.async_wait(asio::posix::descriptor_base::wait_read,
                     [self = shared_from_this(), generation = socket_generation_](error_code ec) {
                       if (generation != self->socket_generation_) return;
                       self->read_armed_ = false;
                       if (ec) return;
                       self->drain(ZOOKEEPER_READ);
                       self->step();
                     });
}

void session::arm_write() {
  if (write_armed_) return;
  write_armed_ = true;
  socket_.async_wait(asio::posix::descriptor_base::wait_write,
                     [self = shared_from_this(), generation = socket_generation_](error_code ec) {
                       if (generation != self->socket_generation_) return;
                       self->write_armed_ = false;
                       if (ec) return;
                       self->drain(ZOOKEEPER_WRITE);
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

// ---------------------------------------------------------------- session events

void session::on_orphan_removed(int, const void* context) {
  ++static_cast<session*>(const_cast<void*>(context))->frames_explained_;  // answers a request of ours
}

// Fake completions (the C client failing requests on a disconnect or a close)
// prove nothing; a server's answer, even an error, proves it read the request.
void session::reply_received(int rc, steady_clock::time_point sent_at) noexcept {
  replies_received_.fetch_add(1, std::memory_order_relaxed);
  ++frames_explained_;
  bool answered = rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT && rc != ZCLOSING && rc != ZSESSIONEXPIRED &&
                  rc != ZINVALIDSTATE && rc != ZAUTHFAILED;
  if (answered) expiry_.heard(sent_at);
}

void session::global_watcher(zhandle_t*, int type, int state, const char*, void* context) {
  // Inside a C client call: record and post only.
  if (type == ZOO_SESSION_EVENT) static_cast<session*>(context)->on_session_event(state);
}

void session::on_session_event(int state) {
  if (state == ZOO_CONNECTED_STATE) {
    on_connected();
  } else if (state == ZOO_CONNECTING_STATE) {
    if (fsm_.on_disconnected()) {
      {
        std::lock_guard lock(facts_mutex_);
        server_.clear();
      }
      set_state_changed();
      start_lost_timer();
    }
  } else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
    if (state == ZOO_AUTH_FAILED_STATE) auth_failed_ = true;
    handle_dead_ = true;  // closed and re-opened after the C call returns
    lost_timer_.cancel();
    if (fsm_.on_expired()) set_state_changed();
    if (auth_failed_) complete_connect_waiters(make_error_code(error::auth_failed));
  }
}

void session::on_connected() {
  const clientid_t* id = zoo_client_id(zh_);
  {
    std::lock_guard lock(facts_mutex_);
    password_.assign(id->passwd, sizeof(id->passwd));
    const char* server = zoo_get_current_server(zh_);
    server_ = server ? server : "";
  }
  session_id_ = id->client_id;
  negotiated_timeout_ms_ = zoo_recv_timeout(zh_);
  expiry_.heard(steady_clock::now());  // the handshake's reply: a server just renewed the session
  lost_timer_.cancel();
  bool had_session = fsm_.ever_connected;
  auto previous_id = fsm_.session_id;
  if (fsm_.on_connected(id->client_id)) {
    if (fsm_.state == session_state::reconnected) reconnections_.fetch_add(1, std::memory_order_relaxed);
    else sessions_opened_.fetch_add(1, std::memory_order_relaxed);
    set_state_changed();
    if (dlock::detail::log_enabled(log_level::info)) {
      char text[160];
      std::snprintf(text, sizeof text, "zk: session 0x%llx %s (timeout %d ms)%s",
                    static_cast<unsigned long long>(id->client_id), to_string(fsm_.state).data(),
                    negotiated_timeout_ms_.load(),
                    had_session && previous_id != id->client_id ? ", a fresh session" : "");
      dlock::detail::log(log_level::info, text);
    }
  }
  complete_connect_waiters({});
}

// Counted from the last moment the servers are known to have heard from us,
// not from the disconnect: the C client notices a silent partition only 2/3 T
// after the last data, and the servers may expire the session T after it.
void session::start_lost_timer() {
  lost_timer_.expires_at(expiry_.lost_at(negotiated_timeout()));
  lost_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec) return;
    if (self->fsm_.on_disconnect_timeout()) {
      dlock::detail::log(log_level::warning,
                         "zk: disconnected long enough for the servers to expire the session: session lost");
      self->set_state_changed();
    }
  });
}

void session::set_state_changed() {
  state_ = static_cast<int>(fsm_.state);
  ++state_version_;
  auto waiters = std::move(state_waiters_);
  state_waiters_.clear();
  for (auto& w : waiters) w->complete({}, fsm_.state);
}

void session::wait_state_change(pending_ptr<session_state> op, std::uint64_t seen) {
  if (op->done()) return;
  if (seen != state_version_) return op->complete({}, fsm_.state);  // changed on the way here
  if (fsm_.state == session_state::closed)
    return op->complete(make_error_code(dlock::error::closed), session_state::closed);
  state_waiters_.push_back(std::move(op));
}

void session::forget_state_waiter(pending_base* op) {
  std::erase_if(state_waiters_, [op](auto& w) { return w.get() == op; });
}

// The handle expired or failed authentication: it can only be closed.
void session::on_handle_dead() {
  handle_dead_ = false;
  release_handle(make_error_code(error::session_expired));
  if (options_.reopen_on_expiry && !auth_failed_ && !closing_) {
    error_code ec;
    if (open_handle(ec)) step();
    else complete_connect_waiters(ec);
    return;
  }
  // Nothing is reopened: a connect() waiting for a session would only time out.
  if (!auth_failed_) complete_connect_waiters(make_error_code(error::session_expired));
}

// Stops the driver and closes the zhandle (outstanding completions run with
// ZCLOSING or the session's error), then ends the watches it held.
void session::release_handle(error_code watch_error) {
  error_code ignored;
  socket_.close(ignored);
  ++socket_generation_;
  read_armed_ = write_armed_ = false;
  timer_.cancel();
  timer_armed_ = false;
  ++timer_generation_;
  {
    c_call_guard guard;
    zookeeper_close(zh_);
  }
  zh_ = nullptr;
  removals_.clear();
  orphans_.clear();
  auto watches = std::move(c_watches_);
  c_watches_.clear();
  for (auto& [raw, w] : watches) w->finish_with(watch_error);
}

void session::watch_registered(std::shared_ptr<watch_state> w) {
  auto* raw = w.get();
  c_watches_.emplace(raw, std::move(w));
}

void session::watch_released(watch_state* w) { c_watches_.erase(w); }

void session::remove_watch_later(std::shared_ptr<watch_state> w) { removals_.push_back(std::move(w)); }

// ---------------------------------------------------------------- closing

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
  if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) {
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
  ++socket_generation_;  // the driver's waits end here
  read_armed_ = write_armed_ = false;
  timer_.cancel();
  timer_armed_ = false;
  ++timer_generation_;
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

// Our dup is the C client's socket: its fd still names the same socket.
bool session::socket_is_current() const {
  if (!socket_.is_open() || socket_fd_number_ < 0) return false;
  struct ::stat st {};
  if (::fstat(socket_fd_number_, &st) != 0) return false;
  return st.st_dev == socket_dev_ && st.st_ino == socket_ino_;
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
  auto waiters = std::move(close_waiters_);
  close_waiters_.clear();
  for (auto& w : waiters) w->complete({});
}

}  // namespace dlock::zk::detail
