// The Redis connection and lock when their server stops (SIGSTOP), dies
// (SIGKILL) and comes back. Uses the fifth master; always resumes/restarts it.
#include "integration/redis_support.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/lock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <memory>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using dlock::error_code;
using namespace std::chrono_literals;
using redis_test::run;

namespace {

constexpr auto tuple_token = asio::as_tuple(asio::deferred);
constexpr std::size_t victim = 4;

redis::options victim_options() { return redis_test::master_options(victim); }
std::string victim_name() { return dlock::test::redis_name(victim); }

// Undoes a pause or kill whatever the test does.
struct server_guard {
  std::string action;
  ~server_guard() { dlock::test::server_action(action, victim_name()); }
};

template <class... Args>
asio::awaitable<std::tuple<error_code, redis::reply>> attempt(redis::connection& c, Args... args) {
  auto op = c.exec(redis::command(args...), tuple_token);
  co_return co_await std::move(op);
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(tuple_token);
}

bool failed_for_silence(error_code ec) {
  return ec == redis::error::timed_out || ec == redis::error::not_connected || ec == redis::error::connection_lost;
}

// A stopped server (SIGSTOP: no RST, the kernel still ACKs, like a
// black-holed master) is declared dead by the first command that times out
// with nothing heard since it was sent: the connection resets and
// reconnects, instead of keeping every timed-out command in flight until TCP
// gives up (safety review F12e).
asio::awaitable<void> paused_server_times_commands_out(asio::any_io_executor ex) {
  auto o = victim_options();
  o.command_timeout = 300ms;
  o.reconnect_min = 20ms;
  o.reconnect_max = 100ms;
  redis::connection c(ex, o);
  co_await c.connect();
  auto key = dlock::test::unique_name("paused");
  {
    server_guard guard{"resume"};
    dlock::test::server_action("pause", victim_name());
    auto [ec1, r1] = co_await attempt(c, "SET", key, "1");
    BOOST_CHECK(ec1 == redis::error::timed_out);
    int timed_out = 1;
    for (int i = 0; i < 6; ++i) {
      auto [ec, r] = co_await attempt(c, "GET", key);
      BOOST_CHECK_MESSAGE(failed_for_silence(ec), ec.message());
      timed_out += ec == redis::error::timed_out;
      co_await sleep_for(50ms);
    }
    BOOST_TEST_MESSAGE(timed_out << " commands timed out during the pause; " << c.stats().connects << " connects");
    BOOST_CHECK_GE(c.stats().connects, 2u);  // reconnected (to the stopped server: the kernel accepts)
    BOOST_CHECK_EQUAL(c.stats().pending, 0u);  // no timed-out command kept in flight
  }
  // Resumed: a fresh connection answers.
  auto [up_ec] = co_await c.wait_for(redis::connection_state::connected, tuple_token);
  BOOST_CHECK(!up_ec);
  auto [ec3, r3] = co_await attempt(c, "ECHO", "after the pause");
  if (ec3 == redis::error::timed_out || ec3 == redis::error::not_connected) {  // the last reconnect was to the
    auto [again_ec] = co_await c.wait_for(redis::connection_state::connected, tuple_token);  // stopped server
    BOOST_CHECK(!again_ec);
    std::tie(ec3, r3) = co_await attempt(c, "ECHO", "after the pause");
  }
  BOOST_CHECK_MESSAGE(!ec3, ec3.message());
  BOOST_CHECK_EQUAL(r3.string(), "after the pause");
  co_await attempt(c, "DEL", key);
}

// The same when every command is abandoned before its timeout, as Redlock
// abandons a master's command after its own master_timeout: the oldest
// unanswered command still counts as a witness of the silence.
asio::awaitable<void> paused_server_with_abandoned_commands_resets(asio::any_io_executor ex) {
  auto o = victim_options();
  o.command_timeout = 300ms;
  o.reconnect_min = 20ms;
  o.reconnect_max = 100ms;
  redis::connection c(ex, o);
  co_await c.connect();
  auto key = dlock::test::unique_name("abandoned");
  {
    server_guard guard{"resume"};
    dlock::test::server_action("pause", victim_name());
    for (int i = 0; i < 4; ++i) {
      asio::cancellation_signal signal;
      auto done = std::make_shared<error_code>();
      c.exec(redis::command("GET", key),
             asio::bind_cancellation_slot(signal.slot(), [done](error_code ec, redis::reply) { *done = ec; }));
      co_await sleep_for(50ms);
      signal.emit(asio::cancellation_type::terminal);
      co_await sleep_for(1ms);
      BOOST_CHECK(*done == asio::error::operation_aborted);
    }
    for (int i = 0; i < 50 && c.stats().connects < 2; ++i) co_await sleep_for(100ms);  // a bound, not a timing check
    BOOST_CHECK_GE(c.stats().connects, 2u);
    BOOST_CHECK_EQUAL(c.stats().pending, 0u);
  }
}

asio::awaitable<void> killed_server_fails_commands_then_reconnects(asio::any_io_executor ex) {
  auto o = victim_options();
  o.command_timeout = 0ms;  // no timeout: only the loss itself can end the BLPOP
  o.reconnect_min = 20ms;
  o.reconnect_max = 200ms;
  redis::connection c(ex, o);
  co_await c.connect();
  {
    server_guard guard{"restart"};
    // A command that blocks on the server; then the server dies under it.
    bool done = false;
    error_code blocked_ec;
    c.exec(redis::command("BLPOP", dlock::test::unique_name("never"), "0"), [&](error_code ec, redis::reply) {
      blocked_ec = ec;
      done = true;
    });
    co_await sleep_for(50ms);
    BOOST_CHECK(!done);
    dlock::test::server_action("kill", victim_name());
    auto [lost_ec] = co_await c.wait_for(redis::connection_state::disconnected, tuple_token);
    BOOST_CHECK(!lost_ec);
    co_await sleep_for(1ms);  // let the posted completion run
    BOOST_CHECK(done);
    BOOST_CHECK(blocked_ec == redis::error::connection_lost);
    auto [ec_down, r_down] = co_await attempt(c, "PING");
    BOOST_CHECK(ec_down == redis::error::not_connected || ec_down == redis::error::connection_lost);
  }
  // Restarted by the guard: the connection comes back by itself.
  auto [ec_up] = co_await c.wait_for(redis::connection_state::connected, tuple_token);
  BOOST_CHECK(!ec_up);
  auto [ec, r] = co_await attempt(c, "PING");
  BOOST_CHECK(!ec);
  BOOST_CHECK_EQUAL(r.string(), "PONG");
  BOOST_CHECK_GE(c.stats().connects, 2u);
}

asio::awaitable<void> critical_section(std::chrono::hours length) {
  asio::steady_timer t(co_await asio::this_coro::executor, length);
  co_await t.async_wait(asio::use_awaitable);  // throws operation_aborted when the lock is lost
}

asio::awaitable<void> paused_server_makes_holder_lose_lock(asio::any_io_executor ex) {
  auto o = victim_options();
  o.command_timeout = 200ms;
  redis::connection c(ex, o);
  co_await c.connect();
  redis::lock_options lo;
  lo.ttl = 1500ms;
  lo.auto_extend = true;
  redis::lock l(c, dlock::test::unique_name("lose"), lo);
  auto [ec] = co_await l.acquire(tuple_token);
  BOOST_REQUIRE(!ec);
  co_await sleep_for(600ms);  // at least one extension succeeded
  BOOST_CHECK_GE(l.extensions(), 1u);

  asio::cancellation_signal on_loss;
  l.loss().bind(on_loss);
  error_code section_end;
  std::chrono::milliseconds validity_before_pause{0};
  {
    server_guard guard{"resume"};
    validity_before_pause = l.validity();
    dlock::test::server_action("pause", victim_name());
    // The critical section runs with its cancellation slot bound to the loss.
    auto section = asio::co_spawn(ex, critical_section(std::chrono::hours(1)),
                                  asio::bind_cancellation_slot(on_loss.slot(), asio::as_tuple(asio::use_awaitable)));
    auto [failure] = co_await std::move(section);
    try {
      if (failure) std::rethrow_exception(failure);
    } catch (const boost::system::system_error& e) {
      section_end = e.code();
    }
    // Cancelled by the loss, which came from the failed extension (timed out)
    // while validity remained, not from the validity running out.
  }
  BOOST_CHECK(section_end == asio::error::operation_aborted);
  BOOST_CHECK(l.loss().lost());
  BOOST_CHECK(l.loss().reason() == redis::error::timed_out);
  BOOST_TEST_MESSAGE("loss reason: " << l.loss().reason().message() << "; validity before pause "
                                     << validity_before_pause.count() << " ms");
  BOOST_CHECK(l.validity() == 0ms);
  // The timed-out extension reset the silent connection: wait for the new one.
  auto [up_ec] = co_await c.wait_for(redis::connection_state::connected, tuple_token);
  BOOST_CHECK(!up_ec);
  auto [release_ec] = co_await l.release(tuple_token);
  BOOST_TEST_MESSAGE("release after the loss: " << release_ec.message());
  // The lock contract: a release after a loss reports the loss.
  BOOST_CHECK_MESSAGE(release_ec == l.loss().reason(), release_ec.message());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_fault)

BOOST_AUTO_TEST_CASE(sigstop_times_pending_commands_out) { run(&paused_server_times_commands_out); }
BOOST_AUTO_TEST_CASE(sigstop_resets_a_connection_whose_commands_were_abandoned) {
  run(&paused_server_with_abandoned_commands_resets);
}
BOOST_AUTO_TEST_CASE(sigkill_fails_pending_commands_and_restart_reconnects) {
  run(&killed_server_fails_commands_then_reconnects);
}
BOOST_AUTO_TEST_CASE(sigstop_makes_holder_see_the_loss) { run(&paused_server_makes_holder_lose_lock); }

BOOST_AUTO_TEST_SUITE_END()
