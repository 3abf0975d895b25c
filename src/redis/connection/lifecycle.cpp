#include "redis/connection/lifecycle.hpp"

#include "redis/connection/sentinel.hpp"

#include <dlock/error.hpp>

#include <algorithm>

namespace dlock::redis::detail {

std::vector<command> greeting(const options& o) {
  std::vector<command> out;
  if (!o.password.empty()) {
    command auth;
    auth.arg(std::string_view("AUTH"));
    if (!o.username.empty()) auth.arg(o.username);
    auth.arg(o.password);
    out.push_back(std::move(auth));
  }
  if (o.database != 0) {
    command select;
    select.arg(std::string_view("SELECT")).arg(o.database);
    out.push_back(std::move(select));
  }
  if (!o.client_name.empty()) {
    command setname;
    setname.arg(std::string_view("CLIENT")).arg(std::string_view("SETNAME")).arg(o.client_name);
    out.push_back(std::move(setname));
  }
  if (!o.sentinel.master_name.empty()) out.push_back(command{"INFO", "replication"});
  return out;
}

lifecycle::lifecycle(const options& o, std::uint32_t seed)
    : address_{o.host, o.port},
      sentinel_(!o.sentinel.master_name.empty()),
      tls_(o.tls.enabled),
      reconnect_(o.reconnect),
      reconnect_min_(o.reconnect_min),
      reconnect_max_(o.reconnect_max),
      backoff_(o.reconnect_min),
      random_(seed) {
  for (auto& c : greeting(o)) greeting_.push_back(std::move(c).take_encoded());
}

connection_state lifecycle::state() const noexcept {
  switch (phase_) {
    case phase::idle:
    case phase::backoff: return connection_state::disconnected;
    case phase::connected: return connection_state::connected;
    case phase::closed: return connection_state::closed;
    default: return connection_state::connecting;
  }
}

bool lifecycle::attempting(std::uint64_t attempt) const noexcept {
  if (attempt != attempt_) return false;
  return phase_ == phase::discovering || phase_ == phase::resolving || phase_ == phase::connecting ||
         phase_ == phase::tls_handshake || phase_ == phase::greeting;
}

namespace {

lifecycle::action act(lifecycle::action::kind what) {
  lifecycle::action a;
  a.what = what;
  return a;
}

}  // namespace

// ---- one attempt ----

lifecycle::action lifecycle::start() {
  if (phase_ != phase::idle) return {};
  phase_ = phase::backoff;  // as if a backoff had just ended
  return on_backoff_done();
}

// With Sentinel, every attempt asks where the master is, unless a sentinel
// has just announced it.
lifecycle::action lifecycle::on_backoff_done() {
  if (phase_ != phase::backoff) return {};
  ++attempt_;
  if (sentinel_ && !std::exchange(switched_, false)) {
    phase_ = phase::discovering;
    return act(action::kind::discover);
  }
  phase_ = phase::resolving;
  action resolve = act(action::kind::resolve);
  resolve.begins_attempt = true;
  return resolve;
}

lifecycle::action lifecycle::on_discovered(std::uint64_t attempt, error_code ec, const server_address& master) {
  if (!at(phase::discovering, attempt)) return {};
  if (ec) return fail(action::kind::attempt_failed, ec);
  address_ = master;
  phase_ = phase::resolving;
  return act(action::kind::resolve);
}

lifecycle::action lifecycle::on_resolved(std::uint64_t attempt, error_code ec) {
  if (!at(phase::resolving, attempt)) return {};
  if (ec) return fail(action::kind::attempt_failed, ec);
  phase_ = phase::connecting;
  return act(action::kind::connect);
}

lifecycle::action lifecycle::on_connected(std::uint64_t attempt, error_code ec) {
  if (!at(phase::connecting, attempt)) return {};
  if (ec) return fail(action::kind::attempt_failed, ec);
  if (!tls_) return open_session();
  phase_ = phase::tls_handshake;
  return act(action::kind::tls_handshake);
}

lifecycle::action lifecycle::on_tls_handshake(std::uint64_t attempt, error_code ec) {
  if (!at(phase::tls_handshake, attempt)) return {};
  if (ec) return fail(action::kind::attempt_failed, ec);
  return open_session();
}

// The session opens before the greeting: its commands go through it.
lifecycle::action lifecycle::open_session() {
  phase_ = phase::greeting;
  greeted_ = 0;
  action next = greet_next();
  next.open_session = true;
  return next;
}

lifecycle::action lifecycle::greet_next() {
  if (greeted_ < greeting_.size()) {
    action greet = act(action::kind::greet);
    greet.index = greeted_;
    return greet;
  }
  phase_ = phase::connected;
  backoff_ = reconnect_min_;  // a loss after a success starts the delays over
  return act(action::kind::up);
}

// A refusal (wrong password, no such database) fails the attempt with the
// server's error, as a socket error would.
lifecycle::action lifecycle::on_greeting_reply(std::uint64_t attempt, error_code ec, const reply& answer) {
  if (!at(phase::greeting, attempt)) return {};
  if (ec) return fail(action::kind::attempt_failed, ec);
  if (sentinel_ && greeted_ + 1 == greeting_.size()) return check_role(answer);
  ++greeted_;
  return greet_next();
}

// The greeting's INFO replication: the sentinels may name a server that is
// no master yet (or any more); one whose history is not the last master's
// is a new master, whatever its address (a promoted replica, or a master
// restarted without its data).
lifecycle::action lifecycle::check_role(const reply& info) {
  auto role = replication_of(info.string());
  if (!role.master) return fail(action::kind::attempt_failed, error::not_master);
  bool changed = !replid_.empty() && role.replid != replid_;
  replid_ = std::move(role.replid);
  if (changed) new_master();
  ++greeted_;
  action next = greet_next();
  next.master_changed = changed;
  return next;
}

lifecycle::action lifecycle::on_connect_timeout(std::uint64_t attempt) {
  if (!attempting(attempt)) return {};
  return fail(action::kind::attempt_failed, error::timed_out);
}

// During the greeting the loss fails the attempt: connect() waiters get
// timed_out for a silent server, connection_lost for anything else (what the
// greeting command itself got).
lifecycle::action lifecycle::on_lost(error_code why) {
  if (phase_ == phase::connected) return fail(action::kind::lost, why);
  if (phase_ != phase::greeting) return {};
  return fail(action::kind::attempt_failed,
              why == error::timed_out ? error_code(error::timed_out) : error_code(error::connection_lost));
}

// ---- a failover ----

// Every sentinel announces a switch: the first moves the connection, the
// others name where it already goes.
lifecycle::action lifecycle::on_switch_master(const server_address& master) {
  if (phase_ == phase::idle || phase_ == phase::closed) return {};
  if (master.host == address_.host && master.port == address_.port) return {};
  address_ = master;
  switched_ = true;
  new_master();
  // The new master is known: no reason to wait.
  action a = act(reconnect_ ? action::kind::retry_now : action::kind::none);
  if (phase_ == phase::connected) a = fail(action::kind::lost, dlock::error::failed_over);
  else if (phase_ != phase::backoff) a = fail(action::kind::attempt_failed, dlock::error::failed_over);
  a.backoff = duration::zero();
  a.master_changed = true;
  return a;
}

// Without Sentinel there is nowhere else to go: the locks are lost, the
// session stays (a replica still answers reads).
lifecycle::action lifecycle::on_read_only() {
  if (phase_ != phase::connected) return {};
  new_master();
  action a;
  if (sentinel_) a = fail(action::kind::lost, error::read_only);
  a.master_changed = true;
  return a;
}

bool lifecycle::close() noexcept {
  if (phase_ == phase::closed) return false;
  phase_ = phase::closed;
  return true;
}

// ---- after a failure ----

lifecycle::action lifecycle::fail(action::kind what, error_code ec) {
  action a = act(what);
  a.error = ec;
  phase_ = phase::backoff;  // until close() when not reconnecting
  a.retry = reconnect_;
  if (a.retry) a.backoff = next_backoff();
  return a;
}

// Doubles from reconnect_min to reconnect_max, reset after a success. Full
// jitter on the upper half, so many clients do not reconnect in step.
lifecycle::duration lifecycle::next_backoff() {
  auto current = std::chrono::duration_cast<std::chrono::milliseconds>(backoff_);
  backoff_ = std::min<duration>(backoff_ * 2, reconnect_max_);
  auto half = current.count() / 2;
  std::uniform_int_distribution<long long> jitter(0, half > 0 ? half : 0);
  return std::chrono::milliseconds(current.count() - half + jitter(random_));
}

}  // namespace dlock::redis::detail
