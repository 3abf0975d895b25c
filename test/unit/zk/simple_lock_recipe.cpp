// The simple lock's acquire state machine, driven by hand-written replies:
// the path of every acquire, and a fault at every step.
#include <dlock/error.hpp>
#include <dlock/zk/error.hpp>

#include "zk/locks/simple_lock_recipe.hpp"

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <functional>
#include <vector>

using namespace dlock::zk::detail;
using action = acquire_action;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t us = 42;     // our session
constexpr std::int64_t other = 41;  // the holder's session
const auto aborted = make_error_code(boost::asio::error::operation_aborted);

reply ok() { return {}; }
reply r(step_result s, dlock::error_code ec) { return {s, ec}; }
reply loss() { return r(step_result::connection_loss, make_error_code(dlock::zk::error::connection_loss)); }
reply exists() { return r(step_result::node_exists, make_error_code(dlock::zk::error::node_exists)); }
reply missing() { return r(step_result::no_node, make_error_code(dlock::zk::error::no_node)); }
reply expired() { return r(step_result::session_lost, make_error_code(dlock::zk::error::session_expired)); }
reply closed() { return r(step_result::closed, make_error_code(dlock::error::closed)); }

simple_acquire_machine machine(bool wait = true, retry_policy retry = {}) {
  return simple_acquire_machine({"/locks/a", wait, retry});
}

action created(simple_acquire_machine& m, reply rep, std::int64_t czxid = 7) {
  return m.on_created(rep, "/locks/a", czxid, ok(), {});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_simple_lock_recipe)

BOOST_AUTO_TEST_CASE(uncontended_acquire_is_one_create) {
  auto m = machine();
  BOOST_TEST((m.start() == action::create));
  BOOST_TEST(m.create_path() == "/locks/a");
  BOOST_TEST((created(m, ok(), 77) == action::done));
  BOOST_TEST(!m.result());
  BOOST_TEST(m.own_path() == "/locks/a");
  BOOST_TEST(m.fencing_token() == 77);
}

BOOST_AUTO_TEST_CASE(taken_reads_the_owner_with_a_watch_waits_and_races_again) {
  auto m = machine();
  m.start();
  BOOST_TEST((created(m, exists()) == action::watch_owner));
  BOOST_TEST(m.target_path() == "/locks/a");
  BOOST_TEST(!m.needs_sync());
  BOOST_TEST((m.on_owner(ok(), other, 5, us) == action::wait));
  BOOST_TEST((m.on_watch_fired(ok()) == action::create));  // the holder's node went
  BOOST_TEST((created(m, exists()) == action::watch_owner));  // someone was faster
  BOOST_TEST((m.on_owner(ok(), other, 6, us) == action::wait));
  BOOST_TEST((m.on_watch_fired(ok()) == action::create));
  BOOST_TEST((created(m, ok(), 9) == action::done));
  BOOST_TEST(!m.result());
  BOOST_TEST(m.fencing_token() == 9);
}

BOOST_AUTO_TEST_CASE(try_acquire_fails_taken_without_leaving_anything) {
  auto m = machine(/*wait=*/false);
  m.start();
  created(m, exists());
  BOOST_TEST((m.on_owner(ok(), other, 5, us) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::error::taken));
  BOOST_TEST(m.own_path().empty());
}

BOOST_AUTO_TEST_CASE(holder_gone_between_create_and_check_creates_again) {
  auto m = machine();
  m.start();
  created(m, exists());
  BOOST_TEST((m.on_owner(missing(), 0, 0, us) == action::create));
}

BOOST_AUTO_TEST_CASE(missing_parent_is_ensured_then_created_again_bounded) {
  auto m = machine(true, {2, 10ms, 40ms});
  m.start();
  BOOST_TEST((created(m, missing()) == action::ensure_path));  // a new path: made on demand, no failure
  BOOST_TEST(m.path_to_ensure() == "/locks");
  BOOST_TEST((m.on_ensured(ok()) == action::create));
  BOOST_TEST((created(m, missing()) == action::ensure_path));  // reaped again: failure 1
  BOOST_TEST((m.on_ensured(loss()) == action::create));        // the create says whether it is back
  BOOST_TEST((created(m, missing()) == action::ensure_path));  // reaped again: failure 2
  BOOST_TEST((m.on_ensured(ok()) == action::create));
  BOOST_TEST((created(m, missing()) == action::done));         // over the budget of 2
  BOOST_TEST(m.result() == make_error_code(dlock::zk::error::no_node));
}

BOOST_AUTO_TEST_CASE(ensure_failure_ends_the_acquire) {
  auto m = machine();
  m.start();
  created(m, missing());
  auto denied = r(step_result::failed, make_error_code(dlock::zk::error::no_auth));
  BOOST_TEST((m.on_ensured(denied) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::zk::error::no_auth));
}

BOOST_AUTO_TEST_CASE(connection_loss_at_create_adopts_only_our_sessions_node) {
  auto m = machine();
  m.start();
  BOOST_TEST((created(m, loss()) == action::backoff));
  BOOST_TEST(m.delay().count() == 20);
  BOOST_TEST((m.on_backoff_done() == action::watch_owner));
  BOOST_TEST(m.needs_sync());  // the read must see our create if it landed
  BOOST_TEST((m.on_owner(ok(), us, 11, us) == action::done));
  BOOST_TEST(!m.result());
  BOOST_TEST(m.own_path() == "/locks/a");
  BOOST_TEST(m.fencing_token() == 11);
}

BOOST_AUTO_TEST_CASE(connection_loss_at_create_then_anothers_node_waits) {
  auto m = machine();
  m.start();
  created(m, loss());
  m.on_backoff_done();
  BOOST_TEST((m.on_owner(ok(), other, 11, us) == action::wait));
  BOOST_TEST(!m.needs_sync());
  BOOST_TEST(m.own_path().empty());
}

BOOST_AUTO_TEST_CASE(connection_loss_at_create_that_never_happened_creates_again) {
  auto m = machine();
  m.start();
  created(m, loss());
  m.on_backoff_done();
  BOOST_TEST((m.on_owner(missing(), 0, 0, us) == action::create));
  BOOST_TEST(!m.needs_sync());
}

BOOST_AUTO_TEST_CASE(connection_loss_at_the_check_retries_with_growing_backoff_then_fails) {
  auto m = machine(true, {2, 10ms, 15ms});
  m.start();
  created(m, exists());
  BOOST_TEST((m.on_owner(loss(), 0, 0, us) == action::backoff));
  BOOST_TEST(m.delay().count() == 10);
  BOOST_TEST((m.on_backoff_done() == action::watch_owner));
  BOOST_TEST((m.on_owner(loss(), 0, 0, us) == action::backoff));
  BOOST_TEST(m.delay().count() == 15);
  m.on_backoff_done();
  BOOST_TEST((m.on_owner(loss(), 0, 0, us) == action::done));  // nothing of ours can exist
  BOOST_TEST(m.result() == make_error_code(dlock::zk::error::connection_loss));
  BOOST_TEST(!m.hunting());
}

BOOST_AUTO_TEST_CASE(connection_loss_while_waiting_checks_again) {
  auto m = machine();
  m.start();
  created(m, exists());
  m.on_owner(ok(), other, 5, us);
  BOOST_TEST((m.on_watch_fired(loss()) == action::watch_owner));
}

BOOST_AUTO_TEST_CASE(session_expiry_while_waiting_fails_with_nothing_left) {
  auto m = machine();
  m.start();
  created(m, exists());
  m.on_owner(ok(), other, 5, us);
  BOOST_TEST((m.on_watch_fired(expired()) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::zk::error::session_expired));
  BOOST_TEST(m.own_path().empty());
}

// Retries ran out while a create's outcome was unknown: the acquire fails
// at once (hunting), and the search for the node it may have made goes on.
simple_acquire_machine exhaust_while_create_unknown() {
  auto m = machine(true, {1, 10ms, 40ms});
  m.start();
  BOOST_TEST((created(m, loss()) == action::backoff));
  m.on_backoff_done();
  BOOST_TEST(!m.hunting());
  BOOST_TEST((m.on_owner(loss(), 0, 0, us) == action::backoff));
  BOOST_TEST(m.hunting());
  BOOST_TEST(m.result() == make_error_code(dlock::zk::error::connection_loss));
  return m;
}

BOOST_AUTO_TEST_CASE(exhausted_while_create_unknown_finds_and_removes_our_node) {
  auto m = exhaust_while_create_unknown();
  for (int i = 0; i < 20; ++i) {  // paced, unbounded while the session lives
    BOOST_TEST((m.on_backoff_done() == action::watch_owner));
    BOOST_TEST((m.on_owner(loss(), 0, 0, us) == action::backoff));
    BOOST_TEST(m.delay().count() == 40);  // at the cap
  }
  m.on_backoff_done();
  BOOST_TEST(m.needs_sync());
  BOOST_TEST((m.on_owner(ok(), us, 13, us) == action::remove_owned));
  BOOST_TEST(m.target_path() == "/locks/a");
  BOOST_TEST(m.fencing_token() == 13);
  BOOST_TEST((m.on_removed(ok()) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::zk::error::connection_loss));  // the acquire's own error
  BOOST_TEST(m.own_path().empty());
}

BOOST_AUTO_TEST_CASE(exhausted_while_create_unknown_leaves_anothers_node_alone) {
  auto m = exhaust_while_create_unknown();
  m.on_backoff_done();
  BOOST_TEST((m.on_owner(ok(), other, 13, us) == action::done));
  BOOST_TEST(m.own_path().empty());
}

BOOST_AUTO_TEST_CASE(exhausted_while_create_unknown_ends_with_the_session) {
  auto m = exhaust_while_create_unknown();
  m.on_backoff_done();
  BOOST_TEST((m.on_owner(expired(), 0, 0, us) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::zk::error::connection_loss));
}

BOOST_AUTO_TEST_CASE(cancel_before_start_sends_nothing) {
  auto m = machine();
  BOOST_TEST(!m.cancel(aborted));
  BOOST_TEST((m.start() == action::done));
  BOOST_TEST(m.result() == aborted);
}

BOOST_AUTO_TEST_CASE(cancel_during_a_create_that_succeeds_removes_our_node) {
  auto m = machine();
  m.start();
  BOOST_TEST(!m.cancel(aborted));  // the reply in flight drives it
  BOOST_TEST((created(m, ok(), 21) == action::remove_owned));
  BOOST_TEST(m.target_path() == "/locks/a");
  BOOST_TEST(m.fencing_token() == 21);
  BOOST_TEST(m.cleaning());
  BOOST_TEST((m.on_removed(loss()) == action::done));  // the removal retries on its own
  BOOST_TEST(m.result() == aborted);
  BOOST_TEST(m.own_path().empty());
}

BOOST_AUTO_TEST_CASE(cancel_during_a_create_that_finds_it_taken_ends_at_once) {
  auto m = machine();
  m.start();
  m.cancel(make_error_code(dlock::error::timed_out));
  BOOST_TEST((created(m, exists()) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::error::timed_out));
}

BOOST_AUTO_TEST_CASE(cancel_during_a_lost_create_still_finds_and_removes_our_node) {
  auto m = machine();
  m.start();
  m.cancel(aborted);
  BOOST_TEST((created(m, loss()) == action::backoff));
  BOOST_TEST((m.on_backoff_done() == action::watch_owner));  // our node may exist: look
  BOOST_TEST((m.on_owner(ok(), us, 3, us) == action::remove_owned));
  BOOST_TEST((m.on_removed(ok()) == action::done));
  BOOST_TEST(m.result() == aborted);
}

BOOST_AUTO_TEST_CASE(cancel_during_the_check_ends_when_it_answers) {
  auto m = machine();
  m.start();
  created(m, exists());
  BOOST_TEST(!m.cancel(aborted));
  BOOST_TEST((m.on_owner(ok(), other, 5, us) == action::done));
  BOOST_TEST(m.result() == aborted);
}

BOOST_AUTO_TEST_CASE(cancel_during_the_check_when_free_sends_no_create) {
  auto m = machine();
  m.start();
  created(m, exists());
  m.cancel(aborted);
  BOOST_TEST((m.on_owner(missing(), 0, 0, us) == action::done));
  BOOST_TEST(m.result() == aborted);
}

BOOST_AUTO_TEST_CASE(cancel_while_waiting_interrupts_the_wait) {
  auto m = machine();
  m.start();
  created(m, exists());
  m.on_owner(ok(), other, 5, us);
  BOOST_TEST(m.cancel(make_error_code(dlock::error::timed_out)));
  BOOST_TEST(!m.cancel(aborted));  // once
  BOOST_TEST((m.on_watch_fired(r(step_result::aborted, aborted)) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::error::timed_out));
}

BOOST_AUTO_TEST_CASE(cancel_during_a_backoff_with_nothing_in_doubt_ends_it) {
  auto m = machine();
  m.start();
  created(m, exists());
  m.on_owner(loss(), 0, 0, us);
  BOOST_TEST(m.cancel(aborted));  // the shell cuts the pause short
  BOOST_TEST((m.on_backoff_done() == action::done));
  BOOST_TEST(m.result() == aborted);
}

BOOST_AUTO_TEST_CASE(cancel_during_the_ensure_sends_no_create) {
  auto m = machine();
  m.start();
  created(m, missing());
  BOOST_TEST(!m.cancel(aborted));
  BOOST_TEST((m.on_ensured(ok()) == action::done));
  BOOST_TEST(m.result() == aborted);
}

BOOST_AUTO_TEST_CASE(steps_of_the_other_recipe_are_refused) {
  auto m = machine();
  m.start();
  BOOST_TEST((m.on_listed(ok(), {}) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::error::invalid_argument));
}

// A fault that ends the session or the client at any step of a contended
// acquire (create taken, check, wait, create): the acquire fails with it and
// leaves nothing (the session took any node of ours with it).
BOOST_AUTO_TEST_CASE(session_or_client_end_at_every_step_fails_cleanly) {
  using step = std::function<action(simple_acquire_machine&, reply)>;
  std::vector<step> script{
      [](simple_acquire_machine& m, reply rep) { return created(m, rep.ec ? rep : exists()); },
      [](simple_acquire_machine& m, reply rep) { return m.on_owner(rep, other, 5, us); },
      [](simple_acquire_machine& m, reply rep) { return m.on_watch_fired(rep); },
      [](simple_acquire_machine& m, reply rep) { return created(m, rep); },
  };
  for (auto fault : {expired(), closed(), r(step_result::failed, make_error_code(dlock::zk::error::no_auth))}) {
    for (std::size_t at = 0; at < script.size(); ++at) {
      BOOST_TEST_CONTEXT("fault " << fault.ec.message() << " at step " << at) {
        auto m = machine();
        m.start();
        for (std::size_t i = 0; i < at; ++i) script[i](m, ok());
        BOOST_TEST((script[at](m, fault) == action::done));
        BOOST_TEST(m.result() == fault.ec);
        BOOST_TEST(m.own_path().empty());
        BOOST_TEST(!m.hunting());
      }
    }
  }
}

// A connection loss at any step is retried (or looked at again), never the end.
BOOST_AUTO_TEST_CASE(connection_loss_at_every_step_is_survived) {
  {
    auto m = machine();
    m.start();
    BOOST_TEST((created(m, loss()) == action::backoff));
  }
  {
    auto m = machine();
    m.start();
    created(m, exists());
    BOOST_TEST((m.on_owner(loss(), 0, 0, us) == action::backoff));
  }
  {
    auto m = machine();
    m.start();
    created(m, exists());
    m.on_owner(ok(), other, 5, us);
    BOOST_TEST((m.on_watch_fired(loss()) == action::watch_owner));
  }
  {
    auto m = machine();
    m.start();
    created(m, missing());
    BOOST_TEST((m.on_ensured(loss()) == action::create));
  }
}

BOOST_AUTO_TEST_SUITE_END()
