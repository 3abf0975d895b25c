#include <dlock/lock_loss.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <optional>

namespace asio = boost::asio;
using dlock::error_code;

namespace {

struct fixture {
  asio::io_context io;
  dlock::lock_loss loss{io.get_executor()};
  std::optional<error_code> result;

  void start_wait() {
    loss.wait([this](error_code ec) { result = ec; });
  }
};

asio::awaitable<void> wait_in_coroutine(dlock::lock_loss& loss, error_code& out) {
  try {
    co_await loss.wait();
  } catch (const boost::system::system_error& e) {
    out = e.code();
  }
}

asio::awaitable<void> long_critical_section(error_code& out) {
  asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::hours(1));
  auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  out = ec;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(lock_loss)

BOOST_FIXTURE_TEST_CASE(wait_completes_with_the_reason_on_fire, fixture) {
  loss.arm();
  start_wait();
  io.restart();
  io.poll();
  BOOST_TEST(!result.has_value());
  loss.fire(dlock::error::not_owned);
  BOOST_TEST(!result.has_value(), "completion must be posted, not inline");
  io.restart();
  io.poll();
  BOOST_REQUIRE(result.has_value());
  BOOST_TEST((*result == dlock::error::not_owned));
  BOOST_TEST(loss.lost());
  BOOST_TEST(!loss.armed());
}

BOOST_FIXTURE_TEST_CASE(fire_without_reason_means_lost_and_is_told_once, fixture) {
  loss.arm();
  loss.fire({});
  BOOST_TEST((loss.reason() == dlock::error::lost));
  loss.fire(dlock::error::expired);  // not armed any more: ignored
  BOOST_TEST((loss.reason() == dlock::error::lost));
  start_wait();  // already lost: completes with the reason at once
  io.restart();
  io.poll();
  BOOST_REQUIRE(result.has_value());
  BOOST_TEST((*result == dlock::error::lost));
}

BOOST_FIXTURE_TEST_CASE(release_aborts_waiters_and_rearm_forgets_the_loss, fixture) {
  loss.arm();
  start_wait();
  loss.disarm();
  io.restart();
  io.poll();
  BOOST_REQUIRE(result.has_value());
  BOOST_TEST((*result == asio::error::operation_aborted));
  loss.arm();
  loss.fire({});
  loss.arm();
  BOOST_TEST(!loss.lost());
}

BOOST_FIXTURE_TEST_CASE(waiting_with_nothing_held_is_an_error, fixture) {
  start_wait();
  io.restart();
  io.poll();
  BOOST_REQUIRE(result.has_value());
  BOOST_TEST((*result == dlock::error::not_held));
}

BOOST_FIXTURE_TEST_CASE(a_wait_can_be_cancelled, fixture) {
  loss.arm();
  asio::cancellation_signal cancel;
  loss.wait(asio::bind_cancellation_slot(cancel.slot(), [this](error_code ec) { result = ec; }));
  cancel.emit(asio::cancellation_type::partial);
  io.restart();
  io.poll();
  BOOST_REQUIRE(result.has_value());
  BOOST_TEST((*result == asio::error::operation_aborted));
  loss.fire({});  // the cancelled waiter is gone: nothing to complete twice
  io.restart();
  io.poll();
}

BOOST_FIXTURE_TEST_CASE(destruction_aborts_waiters, fixture) {
  {
    dlock::lock_loss local(io.get_executor());
    local.arm();
    local.wait([this](error_code ec) { result = ec; });
  }
  io.restart();
  io.poll();
  BOOST_REQUIRE(result.has_value());
  BOOST_TEST((*result == asio::error::operation_aborted));
}

BOOST_FIXTURE_TEST_CASE(co_await_with_the_default_token, fixture) {
  error_code seen;
  loss.arm();
  asio::co_spawn(io, wait_in_coroutine(loss, seen), asio::detached);
  io.restart();
  io.poll();
  loss.fire(dlock::error::lost);
  io.restart();
  io.poll();
  BOOST_TEST((seen == dlock::error::lost));
}

BOOST_FIXTURE_TEST_CASE(a_bound_signal_cancels_the_critical_section, fixture) {
  error_code section;
  asio::cancellation_signal on_loss;
  loss.arm();
  loss.bind(on_loss);
  asio::co_spawn(io, long_critical_section(section), asio::bind_cancellation_slot(on_loss.slot(), asio::detached));
  io.restart();
  io.poll();
  BOOST_TEST(!section);
  loss.fire({});
  io.restart();
  io.poll();
  BOOST_TEST((section == asio::error::operation_aborted));
}

BOOST_FIXTURE_TEST_CASE(release_unbinds_signals, fixture) {
  error_code section;
  asio::cancellation_signal on_loss;
  loss.arm();
  loss.bind(on_loss);
  asio::co_spawn(io, long_critical_section(section), asio::bind_cancellation_slot(on_loss.slot(), asio::detached));
  io.restart();
  io.poll();
  loss.disarm();
  loss.arm();
  loss.fire({});  // a loss of a later hold must not reach the old binding
  io.restart();
  io.run_for(std::chrono::milliseconds(20));
  BOOST_TEST(!section);
  on_loss.emit(asio::cancellation_type::terminal);  // let the coroutine finish
  io.restart();
  io.poll();
}

BOOST_FIXTURE_TEST_CASE(a_binding_with_an_executor_is_emitted_there, fixture) {
  asio::io_context other;
  asio::cancellation_signal on_loss;
  std::optional<asio::cancellation_type> emitted;
  on_loss.slot().assign([&](asio::cancellation_type t) { emitted = t; });
  loss.arm();
  loss.bind(on_loss, other.get_executor(), asio::cancellation_type::partial);
  loss.fire({});
  io.restart();
  io.poll();
  BOOST_TEST(!emitted.has_value(), "emitted on the lock's executor, not the binding's");
  other.poll();
  BOOST_REQUIRE(emitted.has_value());
  BOOST_TEST((*emitted == asio::cancellation_type::partial));
}

BOOST_FIXTURE_TEST_CASE(unbind_stops_an_emission_still_on_its_way, fixture) {
  asio::io_context other;
  asio::cancellation_signal on_loss;
  bool emitted = false;
  on_loss.slot().assign([&](asio::cancellation_type) { emitted = true; });
  loss.arm();
  loss.bind(on_loss, other.get_executor());
  loss.fire({});
  loss.unbind(on_loss);  // e.g. the section ended on its own meanwhile
  other.poll();
  BOOST_TEST(!emitted);
}

BOOST_FIXTURE_TEST_CASE(a_new_hold_drops_the_old_loss_still_on_its_way, fixture) {
  asio::io_context other;
  asio::cancellation_signal on_loss;
  bool emitted = false;
  on_loss.slot().assign([&](asio::cancellation_type) { emitted = true; });
  loss.arm();
  loss.bind(on_loss, other.get_executor());
  loss.fire({});
  loss.disarm();
  loss.arm();
  other.poll();
  BOOST_TEST(!emitted, "a released (or re-acquired) hold's loss must not cancel anything");
}

BOOST_FIXTURE_TEST_CASE(cancelling_a_finished_wait_does_nothing, fixture) {
  asio::cancellation_signal cancel;
  int completions = 0;
  loss.arm();
  loss.wait(asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec) {
    ++completions;
    result = ec;
  }));
  loss.fire(dlock::error::lost);
  io.restart();
  io.poll();
  // The slot keeps its handler (clearing it from the lock's side would race
  // with an emission on the caller's): a late cancel must find nothing.
  cancel.emit(asio::cancellation_type::terminal);
  io.restart();
  io.poll();
  BOOST_TEST(completions == 1);
  BOOST_TEST((*result == dlock::error::lost));
}

BOOST_FIXTURE_TEST_CASE(cancelling_a_wait_after_the_lock_is_gone_does_nothing, fixture) {
  asio::cancellation_signal cancel;
  int completions = 0;
  {
    dlock::lock_loss local(io.get_executor());
    local.arm();
    local.wait(asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec) {
      ++completions;
      result = ec;
    }));
  }
  cancel.emit(asio::cancellation_type::terminal);
  io.restart();
  io.poll();
  BOOST_TEST(completions == 1);
  BOOST_TEST((*result == asio::error::operation_aborted));
}

BOOST_AUTO_TEST_SUITE_END()
