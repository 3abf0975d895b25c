// Session states reported from the C client's events (Curator's vocabulary).
#include "zk/session_fsm.hpp"

#include <boost/test/unit_test.hpp>

using dlock::zk::session_state;
using dlock::zk::detail::expiry_bound;
using dlock::zk::detail::session_fsm;
using namespace std::chrono_literals;

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

// The servers may expire the session T after the last packet they read from
// it; the loss is reported before that, counted from the latest proof.
BOOST_AUTO_TEST_CASE(lost_is_due_before_the_servers_can_expire_the_session) {
  expiry_bound b;
  auto t0 = expiry_bound::clock::now();
  b.heard(t0);
  BOOST_TEST((b.lost_at(4000ms) == t0 + 3600ms));
  BOOST_TEST((b.lost_at(4000ms) < t0 + 4000ms));
}

BOOST_AUTO_TEST_CASE(only_a_later_proof_moves_the_deadline) {
  expiry_bound b;
  auto t0 = expiry_bound::clock::now();
  b.heard(t0 + 2s);
  // A reply to a request sent earlier, read later: the server may have read
  // that request at its send time, which is older than what we know already.
  b.heard(t0 + 1s);
  BOOST_TEST((b.last_heard == t0 + 2s));
  b.heard(t0 + 3s);
  BOOST_TEST((b.lost_at(10s) == t0 + 3s + 9s));
}

BOOST_AUTO_TEST_SUITE_END()
