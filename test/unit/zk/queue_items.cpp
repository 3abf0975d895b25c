#include <dlock/error.hpp>

#include "zk/queue/queue_items.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using dlock::zk::detail::check_item_size;
using dlock::zk::detail::claim_node_data;
using dlock::zk::detail::is_queue_item;
using dlock::zk::detail::queue_items_in_order;

BOOST_AUTO_TEST_SUITE(zk_queue_items)

BOOST_AUTO_TEST_CASE(items_are_qn_and_a_ten_digit_sequence) {
  BOOST_TEST(is_queue_item("qn-0000000000"));
  BOOST_TEST(is_queue_item("qn-2147483647"));
  BOOST_TEST(is_queue_item("qn--2147483648"));  // the counter after its wrap
  BOOST_TEST(!is_queue_item("qn-"));
  BOOST_TEST(!is_queue_item("qn-12"));
  BOOST_TEST(!is_queue_item("qn-00000000001"));
  BOOST_TEST(!is_queue_item("qn-000000000x"));
  BOOST_TEST(!is_queue_item("xn-0000000001"));
  BOOST_TEST(!is_queue_item("_c_lock-0000000001"));
  BOOST_TEST(!is_queue_item("claims"));
}

BOOST_AUTO_TEST_CASE(order_is_by_sequence_and_foreign_children_are_ignored) {
  std::vector<std::string> children{"qn-0000000010", "lock", "qn-0000000002", "qn-0000000003", "entry-001"};
  auto items = queue_items_in_order(children);
  BOOST_TEST(items == (std::vector<std::string>{"qn-0000000002", "qn-0000000003", "qn-0000000010"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(order_survives_the_counter_wrap) {
  std::vector<std::string> children{"qn--2147483647", "qn-2147483646", "qn--2147483648", "qn-2147483647"};
  auto items = queue_items_in_order(children);
  BOOST_TEST(items == (std::vector<std::string>{"qn-2147483646", "qn-2147483647", "qn--2147483648",
                                                "qn--2147483647"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(items_over_the_limit_are_refused) {
  BOOST_TEST(!check_item_size(0, 10));
  BOOST_TEST(!check_item_size(10, 10));
  BOOST_TEST((check_item_size(11, 10) == dlock::error::invalid_argument));
}

BOOST_AUTO_TEST_CASE(claim_data_is_the_identifier_then_the_claims_own_guid) {
  BOOST_TEST(claim_node_data("worker-7", "g1") == "worker-7\nclaim g1");
  BOOST_TEST(claim_node_data("", "g1") == "\nclaim g1");
  BOOST_TEST(claim_node_data("worker-7", "g1") != claim_node_data("worker-7", "g2"));
}

BOOST_AUTO_TEST_SUITE_END()
