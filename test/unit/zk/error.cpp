// Every C client return code maps to a dlock::zk::error with a readable message.
#include <boost/test/unit_test.hpp>

#include <dlock/zk/error.hpp>

#include <zookeeper/zookeeper.h>

#include <set>
#include <string>

BOOST_AUTO_TEST_SUITE(zk_error)

BOOST_AUTO_TEST_CASE(every_return_code_maps_with_a_specific_message) {
  const int codes[] = {ZSYSTEMERROR, ZRUNTIMEINCONSISTENCY, ZDATAINCONSISTENCY, ZCONNECTIONLOSS, ZMARSHALLINGERROR,
                       ZUNIMPLEMENTED, ZOPERATIONTIMEOUT, ZBADARGUMENTS, ZINVALIDSTATE, ZNEWCONFIGNOQUORUM,
                       ZRECONFIGINPROGRESS, ZSSLCONNECTIONERROR, ZAPIERROR, ZNONODE, ZNOAUTH, ZBADVERSION,
                       ZNOCHILDRENFOREPHEMERALS, ZNODEEXISTS, ZNOTEMPTY, ZSESSIONEXPIRED, ZINVALIDCALLBACK,
                       ZINVALIDACL, ZAUTHFAILED, ZCLOSING, ZNOTHING, ZSESSIONMOVED, ZNOTREADONLY,
                       ZEPHEMERALONLOCALSESSION, ZNOWATCHER, ZRECONFIGDISABLED, ZSESSIONCLOSEDREQUIRESASLAUTH,
                       ZTHROTTLEDOP};
  std::set<std::string> messages;
  for (int rc : codes) {
    auto ec = dlock::zk::make_error_code_from_c(rc);
    BOOST_TEST(ec.value() == rc);
    BOOST_TEST(ec.category().name() == std::string("dlock.zk"));
    BOOST_TEST(ec.message().find("unknown ZooKeeper error") == std::string::npos, rc << ": " << ec.message());
    messages.insert(ec.message());
  }
  BOOST_TEST(messages.size() == std::size(codes));  // no two codes share a message
  BOOST_TEST(!dlock::zk::make_error_code_from_c(ZOK));
}

BOOST_AUTO_TEST_CASE(enum_values_equal_the_c_codes) {
  using dlock::zk::error;
  BOOST_TEST(static_cast<int>(error::no_node) == ZNONODE);
  BOOST_TEST(static_cast<int>(error::node_exists) == ZNODEEXISTS);
  BOOST_TEST(static_cast<int>(error::bad_version) == ZBADVERSION);
  BOOST_TEST(static_cast<int>(error::not_empty) == ZNOTEMPTY);
  BOOST_TEST(static_cast<int>(error::throttled_op) == ZTHROTTLEDOP);
  BOOST_TEST((dlock::zk::make_error_code(error::no_node) == dlock::zk::make_error_code_from_c(ZNONODE)));
}

BOOST_AUTO_TEST_CASE(connection_loss_and_expiry_are_distinct) {
  auto loss = dlock::zk::make_error_code(dlock::zk::error::connection_loss);
  auto expired = dlock::zk::make_error_code(dlock::zk::error::session_expired);
  BOOST_TEST(loss != expired);
  BOOST_TEST(loss.message().find("may still live") != std::string::npos);
  BOOST_TEST(expired.message().find("expired") != std::string::npos);
  BOOST_TEST(dlock::zk::make_error_code_from_c(-9999).message() == "unknown ZooKeeper error -9999");
}

BOOST_AUTO_TEST_SUITE_END()
