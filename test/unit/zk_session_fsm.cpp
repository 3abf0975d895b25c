// Session states reported from the C client's events (Curator's vocabulary).
#include <boost/test/unit_test.hpp>

#include <dlock/zk/detail/session_fsm.hpp>

using dlock::zk::session_state;
using dlock::zk::detail::session_fsm;

BOOST_AUTO_TEST_SUITE(zk_session_fsm)

BOOST_AUTO_TEST_CASE(first_session_is_connected) {
  session_fsm f;
  BOOST_TEST((f.state == session_state::connecting));
  BOOST_TEST(!f.on_disconnected());  // nothing to suspend yet
  BOOST_TEST(f.on_connected(7));
  BOOST_TEST((f.state == session_state::connected));
  BOOST_TEST(!f.on_connected(7));  // no change
}

BOOST_AUTO_TEST_CASE(drop_then_same_session_is_suspended_then_reconnected) {
  session_fsm f;
  f.on_connected(7);
  BOOST_TEST(f.on_disconnected());
  BOOST_TEST((f.state == session_state::suspended));
  BOOST_TEST(!f.on_disconnected());
  BOOST_TEST(f.on_connected(7));
  BOOST_TEST((f.state == session_state::reconnected));
  BOOST_TEST(f.on_disconnected());
  BOOST_TEST((f.state == session_state::suspended));
}

BOOST_AUTO_TEST_CASE(too_long_disconnected_is_lost_and_old_session_back_is_reconnected) {
  session_fsm f;
  f.on_connected(7);
  BOOST_TEST(!f.on_disconnect_timeout());  // only while suspended
  f.on_disconnected();
  BOOST_TEST(f.on_disconnect_timeout());
  BOOST_TEST((f.state == session_state::lost));
  BOOST_TEST(f.on_connected(7));
  BOOST_TEST((f.state == session_state::reconnected));
}

BOOST_AUTO_TEST_CASE(expiry_is_lost_and_a_new_session_is_connected) {
  session_fsm f;
  f.on_connected(7);
  f.on_disconnected();
  BOOST_TEST(f.on_expired());
  BOOST_TEST((f.state == session_state::lost));
  BOOST_TEST(!f.on_expired());
  BOOST_TEST(f.on_connected(8));
  BOOST_TEST((f.state == session_state::connected));
  BOOST_TEST(f.session_id == 8);
}

BOOST_AUTO_TEST_CASE(closed_is_final) {
  session_fsm f;
  f.on_connected(7);
  BOOST_TEST(f.on_closed());
  BOOST_TEST(!f.on_connected(7));
  BOOST_TEST(!f.on_expired());
  BOOST_TEST(!f.on_disconnected());
  BOOST_TEST((f.state == session_state::closed));
}

BOOST_AUTO_TEST_SUITE_END()
