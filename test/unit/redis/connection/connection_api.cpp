// A lock's fan-outs' deadline queue (connection_api.hpp), without any
// socket or timer.
#include "redis/connection/connection_api.hpp"

#include <boost/test/unit_test.hpp>

using namespace std::chrono_literals;
namespace detail = dlock::redis::detail;

namespace {
const detail::clock::time_point t0{std::chrono::seconds(1000)};
}

BOOST_AUTO_TEST_SUITE(redis_fanout_deadlines)

// Deadlines fall due in the order watched; those within a sixteenth of the
// timeout of the first go with it; one unwatched (answered) never comes.
BOOST_AUTO_TEST_CASE(the_deadline_queue_hands_out_due_entries_in_order_and_in_batches) {
  detail::deadline_queue queue(160ms);
  detail::deadline_entry a, b, c, d;
  BOOST_CHECK(!queue.next_due());
  queue.watch(a, t0);
  queue.watch(b, t0 + 5ms);
  queue.watch(c, t0 + 9ms);
  queue.watch(d, t0 + 30ms);
  BOOST_CHECK(queue.next_due() == t0 + 160ms);
  BOOST_CHECK(queue.take_due(t0 + 100ms) == nullptr);  // none yet
  queue.unwatch(b);
  BOOST_CHECK(queue.take_due(t0 + 160ms) == &a);
  BOOST_CHECK(queue.take_due(t0 + 160ms) == &c);  // 9 ms later: within 10 ms (160 / 16)
  BOOST_CHECK(queue.take_due(t0 + 160ms) == nullptr);  // d: 30 ms later, a wake-up of its own
  BOOST_CHECK(queue.next_due() == t0 + 190ms);
  BOOST_CHECK(!a.is_linked());
  queue.unwatch(a);  // taken already: nothing happens
  BOOST_CHECK(queue.take_due(t0 + 190ms) == &d);
  BOOST_CHECK(!queue.next_due());
}

BOOST_AUTO_TEST_SUITE_END()
