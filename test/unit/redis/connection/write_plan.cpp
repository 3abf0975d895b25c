// Who writes a connection's commands, and when (write_plan.hpp), with and
// without the speed trick that leaves a write with another connection's
// reply hand-out.
#include "redis/connection/multiplexer.hpp"

#include <boost/test/unit_test.hpp>

#include <ostream>

namespace dlock::redis::detail {
inline std::ostream& operator<<(std::ostream& out, write_plan::action a) { return out << static_cast<int>(a); }
}  // namespace dlock::redis::detail

using dlock::redis::detail::write_plan;
using action = write_plan::action;

BOOST_AUTO_TEST_SUITE(write_plan_suite)

BOOST_AUTO_TEST_CASE(commands_queued_together_share_one_posted_write) {
  write_plan plan(true);
  BOOST_TEST(plan.on_queued(false) == action::post);
  BOOST_TEST(plan.on_queued(false) == action::none);  // the posted write takes it too
  plan.on_due_write_runs();
  BOOST_TEST(plan.on_queued(false) == action::post);  // the next write
}

BOOST_AUTO_TEST_CASE(commands_queued_during_the_own_hand_out_leave_at_its_end) {
  write_plan plan(true);
  plan.on_hand_out_begins();
  BOOST_TEST(plan.handing_out());
  BOOST_TEST(plan.on_queued(false) == action::none);
  BOOST_TEST(plan.on_queued(true) == action::none);
  BOOST_TEST(!plan.take_wanted());  // not before the end
  plan.on_hand_out_ends();
  BOOST_TEST(plan.take_wanted());
  BOOST_TEST(!plan.take_wanted());  // once
  BOOST_TEST(plan.on_queued(false) == action::post);
}

BOOST_AUTO_TEST_CASE(a_hand_out_with_nothing_queued_wants_no_write) {
  write_plan plan(true);
  plan.on_hand_out_begins();
  plan.on_hand_out_ends();
  BOOST_TEST(!plan.take_wanted());
}

BOOST_AUTO_TEST_CASE(commands_queued_during_another_connections_hand_out_are_left_with_it) {
  write_plan plan(true);
  BOOST_TEST(plan.on_queued(true) == action::leave_with_hand_out);
  BOOST_TEST(plan.on_queued(true) == action::none);  // left once
  BOOST_TEST(plan.on_queued(false) == action::none);  // still due
  plan.on_due_write_runs();
  BOOST_TEST(plan.on_queued(false) == action::post);
}

BOOST_AUTO_TEST_CASE(without_the_speed_trick_every_connection_posts_its_own_write) {
  write_plan plan(false);
  BOOST_TEST(plan.on_queued(true) == action::post);
  BOOST_TEST(plan.on_queued(true) == action::none);
  plan.on_due_write_runs();
  plan.on_hand_out_begins();  // its own hand-out still batches
  BOOST_TEST(plan.on_queued(true) == action::none);
  plan.on_hand_out_ends();
  BOOST_TEST(plan.take_wanted());
}

// A handler threw out of the hand-out: what was wanted stays wanted until
// the hand-out resumes, and a command queued meanwhile is still written.
BOOST_AUTO_TEST_CASE(a_hand_out_cut_short_keeps_its_wanted_write) {
  write_plan plan(true);
  plan.on_hand_out_begins();
  BOOST_TEST(plan.on_queued(false) == action::none);
  plan.on_hand_out_ends();  // unwinding
  BOOST_TEST(plan.on_queued(false) == action::post);
  plan.on_due_write_runs();
  BOOST_TEST(plan.take_wanted());  // the resumed hand-out writes as well: nothing is lost
}

BOOST_AUTO_TEST_CASE(the_end_of_a_session_forgets_what_was_wanted) {
  write_plan plan(true);
  plan.on_hand_out_begins();
  BOOST_TEST(plan.on_queued(false) == action::none);
  plan.on_session_end();
  plan.on_hand_out_ends();
  BOOST_TEST(!plan.take_wanted());
}

// A write left with a hand-out whose session then ended still runs: the
// hand-out's owner tells the plan (write_deferred), so the next command is
// not stuck behind a write that never comes.
BOOST_AUTO_TEST_CASE(a_left_write_that_runs_frees_the_next) {
  write_plan plan(true);
  BOOST_TEST(plan.on_queued(true) == action::leave_with_hand_out);
  plan.on_due_write_runs();
  BOOST_TEST(plan.on_queued(true) == action::leave_with_hand_out);
}

BOOST_AUTO_TEST_SUITE_END()
