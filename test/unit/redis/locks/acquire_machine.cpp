// The Redis acquire state machine, one master or many, without any server:
// each step, and a fault at each step.
#include "redis/locks/algorithm/acquire_machine.hpp"

#include <dlock/error.hpp>
#include <dlock/limits.hpp>
#include <dlock/redis/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

using namespace std::chrono_literals;
using dlock::redis::detail::acquire_action;
using dlock::redis::detail::acquire_machine;
using dlock::redis::detail::acquire_policy;
using dlock::redis::detail::retry_schedule;
using kind = acquire_action::kind;

namespace {

const acquire_machine::clock::time_point t0{std::chrono::seconds(1000)};
const dlock::error_code none{};
const dlock::error_code taken = make_error_code(dlock::error::taken);
const dlock::error_code no_quorum = make_error_code(dlock::error::no_quorum);
const dlock::error_code lost_connection = make_error_code(dlock::redis::error::connection_lost);
const dlock::error_code aborted = boost::asio::error::operation_aborted;
constexpr std::chrono::milliseconds valid = 1000ms;  // a won attempt's validity left at its decision

acquire_policy redlock_policy() { return {true, true}; }
acquire_policy single_policy() { return {true, false}; }
acquire_policy try_once() { return {false, false}; }

// Two retries at 100 ms, no jitter, no deadline.
acquire_machine machine(acquire_policy policy, int retries = 2) {
  return acquire_machine(policy, retry_schedule(retries, 100ms, 0ms, std::nullopt));
}

bool is(const acquire_action& a, kind k) { return a.what == k; }

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_acquire_machine)

BOOST_AUTO_TEST_CASE(a_won_first_attempt_completes_at_once) {
  auto m = machine(single_policy());
  BOOST_TEST(is(m.start(false), kind::send_attempt));
  BOOST_TEST(m.attempting());
  auto done = m.attempt_decided(none, false, valid, t0, 0.5);
  BOOST_TEST(is(done, kind::complete));
  BOOST_TEST(!done.result);
  BOOST_TEST(!done.delete_attempt);
  BOOST_TEST(m.done());
}

// Issue #31, reproduction 1: the client paused between the SET and its
// reply longer than the ttl. The yes is no hold (another client may have the
// key now): expired, and the key deleted. It used to complete with success.
BOOST_AUTO_TEST_CASE(a_win_decided_after_its_validity_ran_out_is_expired_and_deleted) {
  for (auto left : {0ms, -1ms, -900ms}) {
    auto m = machine(single_policy());
    m.start(false);
    auto done = m.attempt_decided(none, false, left, t0, 0.5);
    BOOST_TEST(is(done, kind::complete));
    BOOST_TEST((done.result == dlock::error::expired));
    BOOST_TEST(done.delete_attempt);
  }
  auto once = machine(try_once());
  once.start(false);
  BOOST_TEST((once.attempt_decided(none, false, 0ms, t0, 0.5).result == dlock::error::expired));
  // Redlock retries it, as any failed round, after deleting it.
  auto r = machine(redlock_policy());
  r.start(false);
  auto retry = r.attempt_decided(none, false, 0ms, t0, 0.5);
  BOOST_TEST(is(retry, kind::pause));
  BOOST_TEST(retry.delete_attempt);
  // One millisecond left is still a hold.
  auto m = machine(single_policy());
  m.start(false);
  BOOST_TEST(!m.attempt_decided(none, false, 1ms, t0, 0.5).result);
}

BOOST_AUTO_TEST_CASE(no_attempt_goes_out_while_a_cleanup_is_in_flight) {
  auto m = machine(redlock_policy());
  BOOST_TEST(is(m.start(true), kind::wait_for_cleanups));
  BOOST_TEST(!m.attempting());
  BOOST_TEST(is(m.cleanups_settled(), kind::send_attempt));
  BOOST_TEST(is(m.cleanups_settled(), kind::none));  // stale: the attempt is out
  auto paused = m.attempt_decided(taken, true, valid, t0, 0.5);
  BOOST_TEST(is(paused, kind::pause));
  BOOST_TEST(is(m.pause_over(true), kind::wait_for_cleanups));  // the attempt's own cleanup
  BOOST_TEST(is(m.cleanups_settled(), kind::send_attempt));
}

BOOST_AUTO_TEST_CASE(taken_is_retried_until_the_schedule_ends_then_timed_out) {
  auto m = machine(single_policy(), 2);
  m.start(false);
  for (int retry = 0; retry < 2; ++retry) {
    auto a = m.attempt_decided(taken, false, valid, t0, 0.5);
    BOOST_TEST(is(a, kind::pause));
    BOOST_TEST(a.pause == 100ms);
    BOOST_TEST(!a.delete_attempt);  // a nil reply: nothing of ours was set
    BOOST_TEST(is(m.pause_over(false), kind::send_attempt));
  }
  auto end = m.attempt_decided(taken, false, valid, t0, 0.5);
  BOOST_TEST(is(end, kind::complete));
  BOOST_TEST((end.result == dlock::error::timed_out));
  BOOST_TEST(m.attempts() == 3);
}

// A fencing token that went back (a failover) is deleted and retried as a
// taken key is: the counter was raised meanwhile.
BOOST_AUTO_TEST_CASE(a_token_that_went_back_is_deleted_and_retried) {
  auto m = machine(single_policy(), 1);
  m.start(false);
  auto a = m.attempt_decided(dlock::error::stale_token, true, valid, t0, 0.5);
  BOOST_TEST(is(a, kind::pause));
  BOOST_TEST(a.delete_attempt);
  BOOST_TEST(is(m.pause_over(false), kind::send_attempt));
  BOOST_TEST(!m.attempt_decided(none, false, valid, t0, 0.5).result);
}

BOOST_AUTO_TEST_CASE(a_deadline_ends_the_wait_as_timed_out) {
  acquire_machine m(single_policy(), retry_schedule(-1, 100ms, 0ms, t0 + 250ms));
  m.start(false);
  BOOST_TEST(is(m.attempt_decided(taken, false, valid, t0, 0.5), kind::pause));
  m.pause_over(false);
  BOOST_TEST(is(m.attempt_decided(taken, false, valid, t0 + 100ms, 0.5), kind::pause));
  m.pause_over(false);
  auto end = m.attempt_decided(taken, false, valid, t0 + 200ms, 0.5);  // 200 + 100 passes the deadline
  BOOST_TEST((end.result == dlock::error::timed_out));
}

BOOST_AUTO_TEST_CASE(try_acquire_on_a_taken_key_is_taken) {
  auto m = machine(try_once());
  m.start(false);
  auto end = m.attempt_decided(taken, false, valid, t0, 0.5);
  BOOST_TEST(is(end, kind::complete));
  BOOST_TEST((end.result == dlock::error::taken));
  BOOST_TEST(m.attempts() == 1);
}

BOOST_AUTO_TEST_CASE(a_single_instance_error_ends_the_acquire_and_deletes_what_may_have_landed) {
  auto m = machine(single_policy());
  m.start(false);
  auto end = m.attempt_decided(lost_connection, true, valid, t0, 0.5);
  BOOST_TEST(is(end, kind::complete));
  BOOST_TEST((end.result == lost_connection));
  BOOST_TEST(end.delete_attempt);
}

BOOST_AUTO_TEST_CASE(a_redlock_without_quorum_retries_and_deletes_each_attempt) {
  auto m = machine(redlock_policy(), 1);
  m.start(false);
  auto a = m.attempt_decided(no_quorum, true, valid, t0, 0.5);
  BOOST_TEST(is(a, kind::pause));
  BOOST_TEST(a.delete_attempt);
  m.pause_over(false);
  auto end = m.attempt_decided(no_quorum, true, valid, t0, 0.5);
  BOOST_TEST((end.result == no_quorum));  // a fact of its own, not timed_out
  BOOST_TEST(end.delete_attempt);
}

BOOST_AUTO_TEST_CASE(a_cancel_at_each_step_completes_aborted_and_deletes_only_an_attempt_out) {
  {
    auto m = machine(redlock_policy());
    m.start(true);  // waiting for cleanups: nothing sent
    auto end = m.cancel();
    BOOST_TEST((end.result == aborted));
    BOOST_TEST(!end.delete_attempt);
    BOOST_TEST(is(m.cleanups_settled(), kind::none));
  }
  {
    auto m = machine(redlock_policy());
    m.start(false);  // an attempt out: its keys may land
    auto end = m.cancel();
    BOOST_TEST((end.result == aborted));
    BOOST_TEST(end.delete_attempt);
    BOOST_TEST(is(m.attempt_decided(none, false, valid, t0, 0.5), kind::none));  // its late yes wins nothing
  }
  {
    auto m = machine(redlock_policy());
    m.start(false);
    m.attempt_decided(taken, false, valid, t0, 0.5);  // pausing: the last attempt was settled
    auto end = m.cancel();
    BOOST_TEST((end.result == aborted));
    BOOST_TEST(!end.delete_attempt);
    BOOST_TEST(is(m.pause_over(false), kind::none));
  }
  {
    auto m = machine(redlock_policy());
    m.start(false);
    m.attempt_decided(none, false, valid, t0, 0.5);
    BOOST_TEST(is(m.cancel(), kind::none));  // over: a cancel after the win changes nothing
  }
}

BOOST_AUTO_TEST_CASE(a_second_start_is_refused) {
  auto m = machine(single_policy());
  m.start(false);
  auto again = m.start(false);
  BOOST_TEST((again.result == dlock::error::in_progress));
  BOOST_TEST(m.attempting());  // the first acquire goes on
  BOOST_TEST(is(m.attempt_decided(none, false, valid, t0, 0.5), kind::complete));
}

// acquire_for(wait) retries until the wait ends, whatever the options say;
// acquire() follows retry_count and wait_limit. A wait the acquire refuses
// gets no deadline (never added to the clock).
BOOST_AUTO_TEST_CASE(an_acquires_schedule_follows_the_wait_or_the_options) {
  dlock::redis::redlock_options o;
  o.retry_count = 2;
  o.retry_delay = 100ms;
  o.retry_jitter = 0ms;
  auto at_t0 = [] { return t0; };
  auto counted = retry_schedule::for_acquire(o, std::nullopt, at_t0);
  BOOST_TEST(counted.next(t0, 0.5).has_value());
  BOOST_TEST(counted.next(t0, 0.5).has_value());
  BOOST_TEST(!counted.next(t0, 0.5).has_value());  // 1 + 2 attempts

  auto waiting = retry_schedule::for_acquire(o, 1000ms, at_t0);  // retry_count ignored
  for (int i = 0; i < 5; ++i) BOOST_TEST(waiting.next(t0 + 100ms, 0.5).has_value());
  BOOST_TEST(!waiting.next(t0 + 900ms, 0.5).has_value());  // 900 + 100 reaches the wait's end

  o.wait_limit = 500ms;
  auto limited = retry_schedule::for_acquire(o, std::nullopt, at_t0);
  BOOST_TEST(!limited.next(t0 + 400ms, 0.5).has_value());

  auto refused = retry_schedule::for_acquire(o, dlock::max_duration + 1ms, at_t0);
  BOOST_TEST(refused.next(t0 + 24h, 0.5).has_value());  // no deadline, no overflow
}

// What a call is told at once, from the lock's state alone: every refusal,
// and each of release()'s three ways.
BOOST_AUTO_TEST_CASE(a_call_is_refused_or_planned_from_the_lock_state) {
  namespace detail = dlock::redis::detail;
  using detail::hold_phase;
  using step = detail::release_plan::step;
  auto status = [](hold_phase hold, bool one_server = true) {
    detail::lock_status s;
    s.hold = hold;
    s.one_server = one_server;
    return s;
  };
  auto idle = status(hold_phase::idle), held = status(hold_phase::held), lost = status(hold_phase::lost);
  BOOST_TEST(!detail::acquire_refusal(idle, std::nullopt));
  BOOST_TEST(!detail::acquire_refusal(idle, 1ms));
  BOOST_TEST((detail::acquire_refusal(idle, 0ms) == dlock::error::invalid_argument));
  BOOST_TEST((detail::acquire_refusal(idle, dlock::max_duration + 1ms) == dlock::error::invalid_argument));
  BOOST_TEST((detail::acquire_refusal(held, std::nullopt) == dlock::error::already_held));
  BOOST_TEST((detail::acquire_refusal(lost, std::nullopt) == dlock::error::already_held));  // release() first
  BOOST_TEST(!detail::acquire_refusal(status(hold_phase::lost, false), std::nullopt));       // a Redlock takes it again
  auto busy = idle;
  busy.releasing = true;
  BOOST_TEST((detail::acquire_refusal(busy, std::nullopt) == dlock::error::in_progress));
  auto closed = held;
  closed.every_master_closed = true;
  BOOST_TEST((detail::acquire_refusal(closed, std::nullopt) == dlock::error::closed));
  auto unusable = idle;
  unusable.invalid_arguments = true;
  BOOST_TEST((detail::acquire_refusal(unusable, std::nullopt) == dlock::error::invalid_argument));

  BOOST_TEST(!detail::extend_refusal(held));
  BOOST_TEST((detail::extend_refusal(lost) == dlock::error::lost));
  BOOST_TEST((detail::extend_refusal(idle) == dlock::error::not_held));
  auto acquiring = lost;
  acquiring.acquiring = true;
  BOOST_TEST((detail::extend_refusal(acquiring) == dlock::error::not_held));

  BOOST_TEST((detail::plan_release(held).what == step::send));
  BOOST_TEST((detail::plan_release(acquiring).what == step::tell));
  BOOST_TEST((detail::plan_release(acquiring).told == dlock::error::not_held));
  BOOST_TEST((detail::plan_release(lost).what == step::end_and_tell));
  BOOST_TEST(detail::plan_release(lost).tell_loss);
  BOOST_TEST((detail::plan_release(closed).what == step::end_and_tell));
  BOOST_TEST((detail::plan_release(closed).told == dlock::error::closed));
  BOOST_TEST((detail::plan_release(idle).told == dlock::error::not_held));
  auto released = idle;
  released.released = true;
  BOOST_TEST((detail::plan_release(released).what == step::tell));
  BOOST_TEST(!detail::plan_release(released).told);  // a second release() succeeds
}

BOOST_AUTO_TEST_SUITE_END()
