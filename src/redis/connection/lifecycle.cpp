#include "redis/connection/lifecycle.hpp"

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
  return out;
}

lifecycle::lifecycle(const options& o, std::uint32_t seed)
    : tls_(o.tls.enabled),
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
  return phase_ == phase::resolving || phase_ == phase::connecting || phase_ == phase::tls_handshake ||
         phase_ == phase::greeting;
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

lifecycle::action lifecycle::on_backoff_done() {
  if (phase_ != phase::backoff) return {};
  ++attempt_;
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
lifecycle::action lifecycle::on_greeting_reply(std::uint64_t attempt, error_code ec) {
  if (!at(phase::greeting, attempt)) return {};
  if (ec) return fail(action::kind::attempt_failed, ec);
  ++greeted_;
  return greet_next();
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
