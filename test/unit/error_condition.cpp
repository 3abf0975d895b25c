// dlock::condition: one test for "connection lost", "timed out" and "closed"
// whatever the backend's error category.
#include <dlock/error.hpp>
#include <dlock/redis/error.hpp>
#include <dlock/zk/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <string>

using dlock::condition;
using dlock::error_code;
namespace zk = dlock::zk;
namespace redis = dlock::redis;

BOOST_AUTO_TEST_SUITE(error_condition)

BOOST_AUTO_TEST_CASE(connection_lost_matches_both_backends) {
  BOOST_TEST((error_code(zk::error::connection_loss) == condition::connection_lost));
  BOOST_TEST((error_code(zk::error::operation_timeout) == condition::connection_lost));
  BOOST_TEST((error_code(redis::error::connection_lost) == condition::connection_lost));
  BOOST_TEST((error_code(redis::error::not_connected) == condition::connection_lost));
  BOOST_TEST((error_code(zk::error::session_expired) != condition::connection_lost));
  BOOST_TEST((error_code(redis::error::timed_out) != condition::connection_lost));
  BOOST_TEST((error_code(dlock::error::closed) != condition::connection_lost));
  BOOST_TEST((error_code() != condition::connection_lost));
}

BOOST_AUTO_TEST_CASE(timed_out_matches_every_timeout) {
  BOOST_TEST((error_code(dlock::error::timed_out) == condition::timed_out));
  BOOST_TEST((error_code(zk::error::operation_timeout) == condition::timed_out));
  BOOST_TEST((error_code(redis::error::timed_out) == condition::timed_out));
  BOOST_TEST((error_code(zk::error::connection_loss) != condition::timed_out));
  BOOST_TEST((error_code(dlock::error::taken) != condition::timed_out));
  BOOST_TEST((error_code(boost::asio::error::timed_out) != condition::timed_out));  // not dlock's
}

BOOST_AUTO_TEST_CASE(closed_matches_both_backends) {
  BOOST_TEST((error_code(dlock::error::closed) == condition::closed));
  BOOST_TEST((error_code(zk::error::closing) == condition::closed));
  BOOST_TEST((error_code(redis::error::connection_lost) != condition::closed));
}

BOOST_AUTO_TEST_CASE(codes_with_the_same_value_in_other_categories_do_not_match) {
  // redis::error::connection_lost is 7: the same number in dlock's own
  // category (not_owned) or in the generic category means something else.
  auto same_value = static_cast<int>(redis::error::connection_lost);
  BOOST_TEST((error_code(same_value, dlock::error_category()) != condition::connection_lost));
  BOOST_TEST((error_code(same_value, boost::system::generic_category()) != condition::connection_lost));
  BOOST_TEST((error_code(static_cast<int>(zk::error::connection_loss), redis::error_category()) !=
              condition::connection_lost));
}

BOOST_AUTO_TEST_CASE(conditions_have_a_name_and_messages) {
  auto c = dlock::make_error_condition(condition::timed_out);
  BOOST_TEST(std::string(c.category().name()) == "dlock.condition");
  BOOST_TEST(c.message() == "timed out");
  BOOST_TEST(dlock::make_error_condition(condition::connection_lost).message() == "the connection was lost");
}

BOOST_AUTO_TEST_SUITE_END()
