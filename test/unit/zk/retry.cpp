// The one retry policy of the ZooKeeper recipes: what is retried, how often,
// and how long each pause is.
#include <dlock/error.hpp>
#include <dlock/zk/error.hpp>

#include "zk/recipe/retry.hpp"

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <limits>
#include <set>

using namespace dlock::zk::detail;
using namespace std::chrono_literals;
using zkerr = dlock::zk::error;

BOOST_AUTO_TEST_SUITE(zk_retry)

BOOST_AUTO_TEST_CASE(only_a_connection_loss_while_the_session_may_live_is_retried) {
  BOOST_TEST(is_retryable(make_error_code(zkerr::connection_loss)));
  BOOST_TEST(is_retryable(make_error_code(zkerr::operation_timeout)));
  BOOST_TEST(!is_retryable({}));
  BOOST_TEST(!is_retryable(make_error_code(zkerr::session_expired)));
  BOOST_TEST(!is_retryable(make_error_code(zkerr::session_moved)));
  BOOST_TEST(!is_retryable(make_error_code(zkerr::invalid_state)));
  BOOST_TEST(!is_retryable(make_error_code(zkerr::closing)));
  BOOST_TEST(!is_retryable(make_error_code(zkerr::no_node)));
  BOOST_TEST(!is_retryable(make_error_code(zkerr::node_exists)));
  BOOST_TEST(!is_retryable(make_error_code(dlock::error::closed)));
  BOOST_TEST(!is_retryable(make_error_code(boost::asio::error::operation_aborted)));
}

// A recipe makes its path on demand: the first missing parent is no
// failure, even with no retries at all; a parent missing again counts.
BOOST_AUTO_TEST_CASE(the_first_missing_parent_is_no_failure) {
  retry_counter none(retry_policy{0, 20ms, 1000ms});
  BOOST_TEST(none.retry_missing_parent());
  BOOST_TEST(!none.retry_missing_parent());
  retry_counter two(retry_policy{2, 20ms, 1000ms});
  BOOST_TEST(two.retry_missing_parent());
  BOOST_TEST(two.retry_missing_parent());
  BOOST_TEST(two.retry_missing_parent());
  BOOST_TEST(!two.retry_missing_parent());
}

BOOST_AUTO_TEST_CASE(policies_the_recipes_refuse) {
  BOOST_TEST(valid_retry(retry_policy{}));
  BOOST_TEST(valid_retry(retry_policy{0, 0ms, 0ms}));
  BOOST_TEST(valid_retry(retry_policy{std::numeric_limits<int>::max(), dlock::max_duration, dlock::max_duration}));
  BOOST_TEST(!valid_retry(retry_policy{-1, 20ms, 1000ms}));
  BOOST_TEST(!valid_retry(retry_policy{8, -1ms, 1000ms}));
  BOOST_TEST(!valid_retry(retry_policy{8, 20ms, std::chrono::milliseconds::max()}));
}

BOOST_AUTO_TEST_CASE(backoff_doubles_from_the_initial_delay_up_to_the_cap) {
  retry_policy p{5, 20ms, 1000ms};
  BOOST_TEST(backoff_delay(p, 1).count() == 20);
  BOOST_TEST(backoff_delay(p, 2).count() == 40);
  BOOST_TEST(backoff_delay(p, 3).count() == 80);
  BOOST_TEST(backoff_delay(p, 6).count() == 640);
  BOOST_TEST(backoff_delay(p, 7).count() == 1000);
  BOOST_TEST(backoff_delay(p, 1000000).count() == 1000);  // no overflow, however long it retries
}

BOOST_AUTO_TEST_CASE(backoff_never_exceeds_the_cap_nor_overflows_with_odd_settings) {
  BOOST_TEST(backoff_delay({3, 5000ms, 1000ms}, 1).count() == 1000);  // the first already over the cap
  BOOST_TEST(backoff_delay({3, 0ms, 1000ms}, 40).count() == 0);
  BOOST_TEST(backoff_delay({3, -5ms, 1000ms}, 2).count() == 0);
  retry_policy huge{3, 1ms, std::chrono::milliseconds::max()};
  BOOST_TEST(backoff_delay(huge, 100).count() > 0);
}

BOOST_AUTO_TEST_CASE(the_budget_counts_retries_after_the_first_try) {
  retry_policy p{2, 10ms, 100ms};
  BOOST_TEST(may_retry(p, 1));
  BOOST_TEST(may_retry(p, 2));
  BOOST_TEST(!may_retry(p, 3));
  BOOST_TEST(!may_retry({0, 10ms, 100ms}, 1));  // no retries at all
}

BOOST_AUTO_TEST_CASE(counter_retries_losses_within_the_budget_with_growing_delays) {
  retry_counter c({2, 10ms, 15ms});
  auto loss = make_error_code(zkerr::connection_loss);
  BOOST_TEST(c.retry_after(loss));
  BOOST_TEST(c.delay().count() == 10);
  BOOST_TEST(c.retry_after(loss));
  BOOST_TEST(c.delay().count() == 15);
  BOOST_TEST(!c.retry_after(loss));  // spent
  BOOST_TEST(c.failures() == 3);
}

BOOST_AUTO_TEST_CASE(counter_never_retries_what_is_not_retryable) {
  retry_counter c({5, 10ms, 100ms});
  BOOST_TEST(!c.retry_after({}));
  BOOST_TEST(!c.retry_after(make_error_code(zkerr::session_expired)));
  BOOST_TEST(!c.retry_after(make_error_code(zkerr::no_node)));
  BOOST_TEST(c.failures() == 0);  // not counted against the budget
}

BOOST_AUTO_TEST_CASE(counter_counts_failures_judged_retryable_by_the_caller) {
  retry_counter c({2, 10ms, 40ms});
  BOOST_TEST(c.count_failure());
  BOOST_TEST(c.delay().count() == 10);
  BOOST_TEST(c.count_failure());
  BOOST_TEST(c.delay().count() == 20);
  BOOST_TEST(!c.count_failure());  // spent
  c.reset();                       // progress: a fresh budget
  BOOST_TEST(c.failures() == 0);
  BOOST_TEST(c.count_failure());
  BOOST_TEST(c.delay().count() == 10);
}

BOOST_AUTO_TEST_CASE(counter_past_its_budget_saturates_at_the_longest_delay) {
  // A cleanup retried while the session lives keeps counting past the budget.
  retry_counter c({1, 10ms, 40ms});
  for (int i = 0; i < 100; ++i) c.count_failure();
  BOOST_TEST(!c.count_failure());
  BOOST_TEST(c.failures() == 101);
  BOOST_TEST(c.delay().count() == 40);
}

BOOST_AUTO_TEST_CASE(jitter_adds_up_to_a_quarter_never_less) {
  BOOST_TEST(spread(100ms, 0).count() == 100);
  BOOST_TEST(spread(100ms, 0xffffffffu).count() == 124);
  BOOST_TEST(spread(100ms, 0x80000000u).count() == 112);
  BOOST_TEST(spread(3ms, 0xffffffffu).count() == 3);  // too short to spread
  BOOST_TEST(spread(0ms, 0xffffffffu).count() == 0);
  std::set<long> seen;
  for (int i = 0; i < 200; ++i) {
    auto d = with_jitter(1000ms).count();
    BOOST_TEST(d >= 1000);
    BOOST_TEST(d <= 1250);
    seen.insert(d);
  }
  BOOST_TEST(seen.size() > 10u);  // spread, not constant
}

// The lock and semaphore machines back off through retry_pause: the budget
// is retry_counter's, the delay doubles, and the pause says which step to
// resume; the cleanup's retries go past the budget, the search's pace is
// the longest backoff.
BOOST_AUTO_TEST_CASE(a_pause_remembers_its_delay_and_the_step_to_resume) {
  enum class step { idle, listing, cleaning, searching };
  retry_pause<step> pause(retry_policy{2, 20ms, 1000ms});
  BOOST_TEST((pause.resumes() == step::idle));
  BOOST_TEST(pause.after_failure(step::listing));
  BOOST_TEST(pause.delay().count() == 20);
  BOOST_TEST((pause.resumes() == step::listing));
  BOOST_TEST(pause.after_failure(step::listing));
  BOOST_TEST(pause.delay().count() == 40);
  BOOST_TEST(!pause.after_failure(step::cleaning));  // out of budget: the pause is left as it was
  BOOST_TEST(pause.delay().count() == 40);
  BOOST_TEST((pause.resumes() == step::listing));
  pause.after_failure_regardless(step::cleaning);
  BOOST_TEST(pause.delay().count() == 160);
  BOOST_TEST((pause.resumes() == step::cleaning));
  pause.at_slowest(step::searching);
  BOOST_TEST(pause.delay().count() == 1000);
  BOOST_TEST((pause.resumes() == step::searching));
  pause.reset();
  BOOST_TEST(pause.after_failure(step::listing));
  BOOST_TEST(pause.delay().count() == 20);
}

BOOST_AUTO_TEST_SUITE_END()
