// The Redis connection's lifecycle, without any socket: each attempt's steps
// in order, a fault at every step, the greeting, loss, backoff, close.
#include "redis/connection/lifecycle.hpp"

#include <dlock/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <ostream>
#include <vector>

// Printable in failed checks (found by argument-dependent lookup).
namespace dlock {
inline std::ostream& operator<<(std::ostream& out, error e) { return out << make_error_code(e).message(); }
namespace redis {
inline std::ostream& operator<<(std::ostream& out, error e) { return out << make_error_code(e).message(); }
}  // namespace redis
}  // namespace dlock

using namespace std::chrono_literals;
namespace redis = dlock::redis;
using redis::connection_state;
using redis::detail::lifecycle;
using kind = lifecycle::action::kind;
using phase = lifecycle::phase;

namespace {

redis::options base_options() {
  redis::options o;
  o.reconnect_min = 100ms;
  o.reconnect_max = 400ms;
  return o;
}

redis::options greeting_options() {
  auto o = base_options();
  o.username = "u";
  o.password = "p";
  o.database = 2;
  o.client_name = "me";
  return o;
}

const dlock::error_code refused = boost::asio::error::connection_refused;

// Drives a lifecycle through a whole successful attempt.
void connect_fully(lifecycle& l, bool tls, std::size_t greeting_commands) {
  auto a = l.attempt();
  BOOST_TEST((l.on_resolved(a, {}).what == kind::connect));
  auto after_connect = l.on_connected(a, {});
  if (tls) {
    BOOST_TEST((after_connect.what == kind::tls_handshake));
    after_connect = l.on_tls_handshake(a, {});
  }
  for (std::size_t i = 0; i < greeting_commands; ++i) {
    BOOST_TEST((after_connect.what == kind::greet && after_connect.index == i));
    BOOST_TEST(after_connect.open_session == (i == 0));
    after_connect = l.on_greeting_reply(a, {});
  }
  BOOST_TEST((after_connect.what == kind::up));
  BOOST_TEST(after_connect.open_session == (greeting_commands == 0));
  BOOST_TEST((l.state() == connection_state::connected));
}

void check_failed(const lifecycle::action& a, dlock::error_code expected) {
  BOOST_TEST((a.what == kind::attempt_failed));
  BOOST_TEST(a.error == expected);
  BOOST_TEST(a.retry);
  BOOST_TEST((a.backoff >= 50ms && a.backoff <= 100ms));  // the first delay: reconnect_min, jittered
}

}  // namespace

BOOST_AUTO_TEST_SUITE(lifecycle_tests)

BOOST_AUTO_TEST_CASE(the_greeting_is_auth_select_setname_as_configured) {
  auto commands = redis::detail::greeting(greeting_options());
  BOOST_TEST(commands.size() == 3u);
  BOOST_TEST(std::move(commands[0]).take_encoded() == "*3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$1\r\np\r\n");
  BOOST_TEST(std::move(commands[1]).take_encoded() == "*2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n");
  BOOST_TEST(std::move(commands[2]).take_encoded() == "*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$2\r\nme\r\n");
  auto password_only = base_options();
  password_only.password = "p";
  BOOST_TEST(redis::detail::greeting(password_only).size() == 1u);
  BOOST_TEST(redis::detail::greeting(base_options()).empty());
}

BOOST_AUTO_TEST_CASE(an_attempt_resolves_connects_shakes_hands_greets_then_is_up) {
  auto o = greeting_options();
  o.tls.enabled = true;
  lifecycle l(o, 1);
  BOOST_TEST((l.state() == connection_state::disconnected && l.current() == phase::idle));
  BOOST_TEST(l.refusal(false) == redis::error::not_connected);
  BOOST_TEST((l.start().what == kind::resolve));
  BOOST_TEST((l.start().what == kind::none));  // started once; later connect() calls join it
  BOOST_TEST((l.state() == connection_state::connecting));
  auto a = l.attempt();
  BOOST_TEST((l.on_resolved(a, {}).what == kind::connect));
  BOOST_TEST((l.on_connected(a, {}).what == kind::tls_handshake));
  BOOST_TEST(l.refusal(true) == redis::error::not_connected);  // no session yet
  auto greet = l.on_tls_handshake(a, {});
  BOOST_TEST((greet.what == kind::greet && greet.index == 0u && greet.open_session));
  BOOST_TEST(l.greeting_command(0).find("AUTH") != std::string::npos);
  BOOST_TEST(!l.refusal(true));                               // the greeting's own commands go
  BOOST_TEST(l.refusal(false) == redis::error::not_connected);  // the users' wait for it
  greet = l.on_greeting_reply(a, {});
  BOOST_TEST((greet.what == kind::greet && greet.index == 1u && !greet.open_session));
  greet = l.on_greeting_reply(a, {});
  BOOST_TEST((greet.what == kind::greet && greet.index == 2u));
  auto up = l.on_greeting_reply(a, {});
  BOOST_TEST((up.what == kind::up && !up.open_session));
  BOOST_TEST((l.state() == connection_state::connected));
  BOOST_TEST(!l.refusal(false));
}

BOOST_AUTO_TEST_CASE(without_tls_or_greeting_the_session_opens_up_at_once) {
  lifecycle l(base_options(), 1);
  l.start();
  connect_fully(l, false, 0);
}

BOOST_AUTO_TEST_CASE(a_fault_at_every_step_fails_the_attempt_with_its_error_then_backs_off) {
  auto o = greeting_options();
  o.tls.enabled = true;
  // Steps: resolve, connect, TLS, AUTH, SELECT, SETNAME; fail each in turn.
  for (int failing = 0; failing < 6; ++failing) {
    BOOST_TEST_CONTEXT("failing step " << failing) {
      lifecycle l(o, 7);
      l.start();
      auto a = l.attempt();
      const dlock::error_code auth_failed = redis::error::auth_failed;
      auto err = [&](int step, dlock::error_code e) { return step == failing ? e : dlock::error_code(); };
      lifecycle::action last = l.on_resolved(a, err(0, refused));
      if (failing > 0) last = l.on_connected(a, err(1, refused));
      if (failing > 1) last = l.on_tls_handshake(a, err(2, refused));
      for (int step = 3; step < 6 && failing >= step; ++step) last = l.on_greeting_reply(a, err(step, auth_failed));
      check_failed(last, failing >= 3 ? auth_failed : refused);
      BOOST_TEST((l.state() == connection_state::disconnected));
      BOOST_TEST(l.refusal(true) == redis::error::not_connected);
      // Late events of the failed attempt change nothing.
      BOOST_TEST((l.on_resolved(a, {}).what == kind::none));
      BOOST_TEST((l.on_connected(a, {}).what == kind::none));
      BOOST_TEST((l.on_greeting_reply(a, {}).what == kind::none));
      BOOST_TEST((l.on_connect_timeout(a).what == kind::none));
      // The backoff ends: a new attempt, which succeeds.
      BOOST_TEST((l.on_backoff_done().what == kind::resolve));
      BOOST_TEST(l.attempt() == a + 1);
      BOOST_TEST((l.on_greeting_reply(a, {}).what == kind::none));  // the old attempt's reply
      connect_fully(l, true, 3);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_connect_timeout_fails_any_step_of_the_attempt) {
  auto o = greeting_options();
  o.tls.enabled = true;
  for (int step = 0; step < 4; ++step) {
    BOOST_TEST_CONTEXT("timing out at step " << step) {
      lifecycle l(o, 3);
      l.start();
      auto a = l.attempt();
      if (step > 0) l.on_resolved(a, {});
      if (step > 1) l.on_connected(a, {});
      if (step > 2) l.on_tls_handshake(a, {});  // greeting
      check_failed(l.on_connect_timeout(a), redis::error::timed_out);
      // The cancelled operation completes late: ignored.
      BOOST_TEST((l.on_tls_handshake(a, boost::asio::error::operation_aborted).what == kind::none));
    }
  }
  lifecycle l(o, 3);
  l.start();
  connect_fully(l, true, 3);
  BOOST_TEST((l.on_connect_timeout(l.attempt()).what == kind::none));  // connected: too late to matter
}

BOOST_AUTO_TEST_CASE(a_loss_during_the_greeting_fails_the_attempt) {
  auto o = greeting_options();
  for (auto why : {dlock::error_code(redis::error::connection_lost), dlock::error_code(redis::error::protocol_error),
                   dlock::error_code(redis::error::timed_out)}) {
    lifecycle l(o, 3);
    l.start();
    auto a = l.attempt();
    l.on_resolved(a, {});
    l.on_connected(a, {});
    // What the greeting command itself gets: timed_out from a silent server, else connection_lost.
    auto expected = why == redis::error::timed_out ? why : dlock::error_code(redis::error::connection_lost);
    check_failed(l.on_lost(why), expected);
  }
}

BOOST_AUTO_TEST_CASE(a_loss_while_connected_backs_off_and_reconnects) {
  lifecycle l(base_options(), 5);
  BOOST_TEST((l.on_lost(redis::error::connection_lost).what == kind::none));  // no session: nothing to lose
  l.start();
  connect_fully(l, false, 0);
  auto lost = l.on_lost(redis::error::connection_lost);
  BOOST_TEST((lost.what == kind::lost && lost.retry));
  BOOST_TEST(lost.error == redis::error::connection_lost);
  BOOST_TEST((l.state() == connection_state::disconnected));
  BOOST_TEST(l.refusal(false) == redis::error::not_connected);
  BOOST_TEST((l.on_lost(redis::error::connection_lost).what == kind::none));  // lost once
  BOOST_TEST((l.on_backoff_done().what == kind::resolve));
  BOOST_TEST((l.on_backoff_done().what == kind::none));
  connect_fully(l, false, 0);
}

BOOST_AUTO_TEST_CASE(backoff_doubles_up_to_the_maximum_with_jitter_and_resets_after_a_success) {
  lifecycle l(base_options(), 11);  // min 100 ms, max 400 ms
  l.start();
  std::vector<std::pair<long, long>> bounds = {{50, 100}, {100, 200}, {200, 400}, {200, 400}};
  for (auto [low, high] : bounds) {
    auto failed = l.on_resolved(l.attempt(), refused);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(failed.backoff).count();
    BOOST_TEST((ms >= low && ms <= high), ms << " in [" << low << ", " << high << "]");
    l.on_backoff_done();
  }
  connect_fully(l, false, 0);
  auto lost = l.on_lost(redis::error::connection_lost);
  BOOST_TEST((lost.backoff >= 50ms && lost.backoff <= 100ms));  // started over
}

BOOST_AUTO_TEST_CASE(without_reconnect_a_failure_or_a_loss_closes) {
  auto o = base_options();
  o.reconnect = false;
  lifecycle first(o, 1);
  first.start();
  auto failed = first.on_resolved(first.attempt(), refused);
  BOOST_TEST((failed.what == kind::attempt_failed && !failed.retry));
  BOOST_TEST(failed.error == refused);  // connect() gets the cause, then the close
  BOOST_TEST(first.close());
  BOOST_TEST((first.state() == connection_state::closed));

  lifecycle later(o, 1);
  later.start();
  connect_fully(later, false, 0);
  auto lost = later.on_lost(redis::error::connection_lost);
  BOOST_TEST((lost.what == kind::lost && !lost.retry));
}

BOOST_AUTO_TEST_CASE(close_at_any_phase_ends_everything) {
  auto o = greeting_options();
  for (int step = 0; step < 5; ++step) {
    BOOST_TEST_CONTEXT("closing at step " << step) {
      lifecycle l(o, 1);
      if (step > 0) l.start();
      auto a = l.attempt();
      if (step > 1) l.on_resolved(a, {});
      if (step > 2) l.on_connected(a, {});  // greeting
      for (int i = 0; step > 3 && i < 3; ++i) l.on_greeting_reply(a, {});  // connected
      BOOST_TEST(l.close());
      BOOST_TEST(!l.close());  // idempotent
      BOOST_TEST((l.state() == connection_state::closed));
      BOOST_TEST(l.refusal(true) == dlock::error::closed);
      BOOST_TEST((l.start().what == kind::none));
      BOOST_TEST((l.on_greeting_reply(a, {}).what == kind::none));
      BOOST_TEST((l.on_connect_timeout(a).what == kind::none));
      BOOST_TEST((l.on_backoff_done().what == kind::none));
      BOOST_TEST((l.on_lost(redis::error::connection_lost).what == kind::none));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
