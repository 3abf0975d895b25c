// The session's lifecycle: opening the zhandle (with its credentials), the
// session events fed to session_fsm, connect and state waiters, the watches
// the C client holds. The poll driver is in session_driver.cpp, the close
// protocol in session_close.cpp.
#include "session.hpp"

#include "watch_state.hpp"

#include <dlock/error.hpp>
#include <dlock/limits.hpp>
#include <dlock/log.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

namespace dlock::zk::detail {

using std::chrono::steady_clock;

bool lost_with_the_connection(int rc) noexcept {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZRUNTIMEINCONSISTENCY;
}

error_code reply_error(int rc) noexcept {
  if (rc == ZCLOSING) return make_error_code(dlock::error::closed);
  // Recipes retry a connection loss; this code would stop them (a lock
  // node's removal gave up on it, leaving the node to block everyone).
  if (rc == ZRUNTIMEINCONSISTENCY) return make_error_code(error::connection_loss);
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

namespace {
// Why `o` cannot open a session (empty when it can). The C client keeps the
// session timeout in an int of milliseconds, computes 2/3 of it through 2 x
// (overflowing beyond INT_MAX / 2), and gives up a handshake not answered
// within that (before the servers negotiate it into [2, 20] ticks): with a
// few milliseconds, or an overflow, it never connects. The connect timer's
// nanoseconds overflow beyond max_duration.
std::string_view options_problem(const options& o) noexcept {
  if (o.session_timeout < min_session_timeout || o.session_timeout > max_session_timeout)
    return "session_timeout must be from zk::min_session_timeout to zk::max_session_timeout";
  if (o.connect_timeout <= std::chrono::milliseconds::zero() || o.connect_timeout > dlock::max_duration)
    return "connect_timeout must be positive and at most dlock::max_duration";
  return {};
}
}  // namespace

void session::connect(pending_ptr<> op) {
  if (op->done()) return;
  if (closing_) return op->complete(make_error_code(dlock::error::closed));
  if (auto problem = options_problem(options_); !problem.empty()) {
    dlock::detail::log(log_level::error, std::string("zk: ") + std::string(problem));
    return op->complete(make_error_code(dlock::error::invalid_argument));
  }
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

// ---------------------------------------------------------------- after C calls

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
    for (auto& node : orphans) {
      dlock::detail::log(log_level::debug, "zk: removing " + node.path + ", created by a cancelled create");
      // Owned by the C client until its completion, which it always calls (a
      // close fails what is pending): the node, to send it again.
      auto removal = std::make_unique<orphan_removal>(orphan_removal{this, std::move(node)});
      int rc;
      {
        c_call_guard guard;
        rc = zoo_adelete(zh_, removal->node.path.c_str(), -1, &session::on_orphan_removed, removal.get());
      }
      if (rc != ZOK) continue;
      removal.release();
      request_sent();
    }
  }
  report_states();
}

// ---------------------------------------------------------------- session events

void session::on_orphan_removed(int rc, const void* context) {
  std::unique_ptr<orphan_removal> removal(static_cast<orphan_removal*>(const_cast<void*>(context)));
  auto& owner = *removal->owner;
  ++owner.frames_explained_;  // answers a request of ours
  // A delete lost with the connection may not have run, and the node (of a
  // session that lives on) would stay: it goes again on the next connection,
  // if its name is its own (see remove_orphan_later). Done (ZOK, ZNONODE),
  // refused, or the session over: nothing more to do.
  if (lost_with_the_connection(rc) && removal->node.unique_name)
    owner.remove_orphan_later(std::move(removal->node.path), true);
}

// Fake completions (the C client failing requests on a disconnect or a close)
// prove nothing; a server's answer, even an error, proves it read the request.
void session::reply_received(int rc, steady_clock::time_point sent_at) noexcept {
  replies_received_.fetch_add(1, std::memory_order_relaxed);
  ++frames_explained_;
  bool answered = !lost_with_the_connection(rc) && rc != ZCLOSING && rc != ZSESSIONEXPIRED && rc != ZINVALIDSTATE &&
                  rc != ZAUTHFAILED;
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
    // No session now: a recipe's "still our session?" check must fail from
    // here on. Until the reopened handle connects, it would otherwise pass,
    // and the request would go out on the next session.
    session_id_ = 0;
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
      self->report_states();
    }
  });
}

void session::set_state_changed() {
  state_ = static_cast<int>(fsm_.state);
  ++state_version_;
  if (options_.observer) unreported_states_.push_back(fsm_.state);
  auto waiters = std::move(state_waiters_);
  state_waiters_.clear();
  for (auto& w : waiters) w->complete({}, fsm_.state);
}

// The observer may call the client: it is told outside the C client's calls.
void session::report_states() {
  if (unreported_states_.empty()) return;
  auto states = std::move(unreported_states_);
  unreported_states_.clear();
  for (auto state : states) options_.observer->on_zk_session({options_.hosts, state});
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
  stop_driver_waits();
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

}  // namespace dlock::zk::detail
