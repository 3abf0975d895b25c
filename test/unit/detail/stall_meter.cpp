// The stall monitor's I/O-free half: lateness, stalls, and the margin a hold keeps.
#include "detail/stall_meter.hpp"

#include <boost/test/unit_test.hpp>

using dlock::detail::stall_meter;
using namespace std::chrono_literals;

namespace {

const stall_meter::clock::time_point t0{std::chrono::hours(1)};

stall_meter meter() { return stall_meter(20ms, 50ms, 10s); }

}  // namespace

BOOST_AUTO_TEST_SUITE(stall_meter_logic)

BOOST_AUTO_TEST_CASE(a_late_tick_under_the_threshold_is_no_stall) {
  auto m = meter();
  BOOST_TEST(!m.on_tick(t0, t0));
  BOOST_TEST(!m.on_tick(t0, t0 + 49ms));
  BOOST_TEST(m.stalls() == 0u);
  BOOST_TEST((m.margin(t0 + 49ms, t0 + 69ms) == 0ns));
}

BOOST_AUTO_TEST_CASE(a_tick_late_by_the_threshold_or_more_is_a_stall) {
  auto m = meter();
  auto lag = m.on_tick(t0, t0 + 600ms);
  BOOST_REQUIRE(lag);
  BOOST_TEST((*lag == 600ms));
  BOOST_TEST(m.stalls() == 1u);
  BOOST_TEST((m.last_stall() == 600ms));
  BOOST_TEST((m.on_tick(t0 + 1s, t0 + 1s + 50ms) == 50ms));
  BOOST_TEST(m.stalls() == 2u);
}

BOOST_AUTO_TEST_CASE(the_next_tick_is_a_period_after_this_one_ran) {
  auto m = meter();
  BOOST_TEST((m.next_due(t0 + 600ms) == t0 + 620ms), "no burst of catch-up ticks after a stall");
}

BOOST_AUTO_TEST_CASE(the_margin_is_the_largest_recent_stall) {
  auto m = meter();
  m.on_tick(t0, t0 + 300ms);
  m.on_tick(t0 + 1s, t0 + 1s + 100ms);
  auto due = m.next_due(t0 + 1s + 100ms);
  BOOST_TEST((m.margin(t0 + 1s + 110ms, due) == 300ms));
}

BOOST_AUTO_TEST_CASE(a_stall_is_forgotten_after_the_memory) {
  auto m = meter();
  m.on_tick(t0, t0 + 300ms);
  auto later = t0 + 300ms + 10s + 1ms;
  BOOST_TEST((m.margin(later, later + 20ms) == 0ns));
  m.on_tick(later, later);  // a timely tick drops what is past the memory
  BOOST_TEST((m.margin(later, later + 20ms) == 0ns));
  BOOST_TEST(m.stalls() == 1u, "the count is for ever");
}

BOOST_AUTO_TEST_CASE(an_overdue_tick_counts_before_it_runs) {
  // A stall going on (or just over) that the timer has not run after yet.
  auto m = meter();
  auto due = t0 + 20ms;
  BOOST_TEST((m.margin(due + 49ms, due) == 0ns), "under the threshold: not yet a stall");
  BOOST_TEST((m.margin(due + 400ms, due) == 400ms));
  m.on_tick(t0 - 1s, t0 - 1s + 500ms);  // an earlier, longer stall still counts
  BOOST_TEST((m.margin(due + 400ms, due) == 500ms));
}

BOOST_AUTO_TEST_SUITE_END()
