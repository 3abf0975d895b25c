// dlock::zk::client against a real ZooKeeper (DLOCK_ZK_HOSTS): every
// operation's success and error paths, watches, cancellation, pipelining,
// completion tokens and threads.
#include "integration/zk_client_support.hpp"

#include <dlock/error.hpp>
#include <dlock/zk/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

using namespace dlock;
using dlock::test::run_coroutine;
using zk::create_mode;
using zk::session_state;
constexpr auto tuple = asio::as_tuple(asio::deferred);

namespace {

std::string base_path(const std::string& what) { return "/" + dlock::test::unique_name("zkc-" + what); }

asio::awaitable<void> every_operation(zk::client& c, std::string base) {
  co_await c.connect();
  BOOST_TEST((c.state() == session_state::connected));
  BOOST_TEST(c.session_id() != 0);
  BOOST_TEST(!c.current_server().empty());
  BOOST_TEST(c.negotiated_session_timeout().count() > 0);

  auto [e1, made] = co_await c.create(base, "hello", create_mode::persistent, tuple);
  BOOST_TEST(!e1, e1.message());
  BOOST_TEST(made.path == base);
  BOOST_TEST(made.stat.version == 0);
  BOOST_TEST(made.stat.data_length == 5);

  auto [e2, again] = co_await c.create(base, "", create_mode::persistent, tuple);
  BOOST_TEST((e2 == zk::error::node_exists), e2.message());

  auto [e3, data, st] = co_await c.get(base, tuple);
  BOOST_TEST(!e3);
  BOOST_TEST(data == "hello");
  BOOST_TEST(st.czxid == made.stat.czxid);

  auto [e4, st2] = co_await c.set(base, "world", 0, tuple);
  BOOST_TEST(!e4);
  BOOST_TEST(st2.version == 1);
  auto [e5, st3] = co_await c.set(base, "stale", 0, tuple);
  BOOST_TEST((e5 == zk::error::bad_version), e5.message());

  auto [e6, present] = co_await c.exists(base, tuple);
  BOOST_TEST(!e6);
  BOOST_REQUIRE(present.has_value());
  BOOST_TEST(present->version == 1);
  auto [e7, absent] = co_await c.exists(base + "/missing", tuple);
  BOOST_TEST(!e7);  // a missing node is not an error
  BOOST_TEST(!absent.has_value());

  auto [e8, eph] = co_await c.create(base + "/e-", "", create_mode::ephemeral_sequential, tuple);
  BOOST_TEST(!e8);
  BOOST_TEST(eph.path.size() == base.size() + 3 + 10);  // 10-digit sequence suffix
  BOOST_TEST(eph.stat.ephemeral_owner == c.session_id());
  auto [e9, seq] = co_await c.create(base + "/p-", "", create_mode::persistent_sequential, tuple);
  BOOST_TEST(!e9);
  BOOST_TEST(seq.stat.ephemeral_owner == 0);
  auto [e10, box] = co_await c.create(base + "/box", "", create_mode::container, tuple);
  BOOST_TEST(!e10, e10.message());
  auto [e10b, child_of_ephemeral] = co_await c.create(eph.path + "/x", "", create_mode::persistent, tuple);
  BOOST_TEST((e10b == zk::error::no_children_for_ephemerals));

  auto [e11, children, parent] = co_await c.get_children(base, tuple);
  BOOST_TEST(!e11);
  std::sort(children.begin(), children.end());
  BOOST_TEST(children.size() == 3u);
  BOOST_TEST(parent.num_children == 3);
  BOOST_TEST(std::count(children.begin(), children.end(), "box") == 1);

  auto [e12] = co_await c.remove(base, -1, tuple);
  BOOST_TEST((e12 == zk::error::not_empty), e12.message());
  auto [e13] = co_await c.remove(seq.path, 5, tuple);
  BOOST_TEST((e13 == zk::error::bad_version));
  for (auto& name : children) {
    auto [e] = co_await c.remove(base + "/" + name, -1, tuple);
    BOOST_TEST(!e, name << ": " << e.message());
  }
  auto [e14] = co_await c.remove(base, 1, tuple);
  BOOST_TEST(!e14);
  auto [e15, gone, gone_stat] = co_await c.get(base, tuple);
  BOOST_TEST((e15 == zk::error::no_node), e15.message());
  auto [e16] = co_await c.remove(base, -1, tuple);
  BOOST_TEST((e16 == zk::error::no_node));
  auto [e17, no_children, no_stat] = co_await c.get_children(base, tuple);
  BOOST_TEST((e17 == zk::error::no_node));
  auto [e18, no_set] = co_await c.set(base, "x", -1, tuple);
  BOOST_TEST((e18 == zk::error::no_node));

  co_await c.close();
  BOOST_TEST((c.state() == session_state::closed));
}

asio::awaitable<void> invalid_paths(zk::client& c) {
  co_await c.connect();
  auto sent = c.stats().requests_sent;
  for (std::string p : {std::string(), std::string("a"), std::string("/a/"), std::string("//"), std::string("/a//b"), std::string("/a\0b", 4)}) {
    auto [e1, made] = co_await c.create(p, "", create_mode::persistent, tuple);
    BOOST_TEST((e1 == dlock::error::invalid_argument));
    auto [e2, d, s] = co_await c.get(p, tuple);
    BOOST_TEST((e2 == dlock::error::invalid_argument));
    auto [e3] = co_await c.remove(p, -1, tuple);
    BOOST_TEST((e3 == dlock::error::invalid_argument));
    auto [e4, s4] = co_await c.set(p, "", -1, tuple);
    BOOST_TEST((e4 == dlock::error::invalid_argument));
    auto [e5, s5] = co_await c.exists(p, tuple);
    BOOST_TEST((e5 == dlock::error::invalid_argument));
    zk::watch w;
    auto [e6, names, s6] = co_await c.get_children(p, w, tuple);
    BOOST_TEST((e6 == dlock::error::invalid_argument));
    auto [e7, event] = co_await w.wait(tuple);
    BOOST_TEST((e7 == dlock::error::invalid_argument));
  }
  BOOST_TEST(c.stats().requests_sent == sent);  // nothing was sent
  co_await c.close();
}

asio::awaitable<void> before_connect_and_after_close(zk::client& c) {
  auto [e1, d1, s1] = co_await c.get("/", tuple);
  BOOST_TEST((e1 == zk::error::invalid_state), e1.message());
  co_await c.connect();
  co_await c.close();
  auto [e2, d2, s2] = co_await c.get("/", tuple);
  BOOST_TEST((e2 == dlock::error::closed), e2.message());
  auto [e3] = co_await c.connect(tuple);
  BOOST_TEST((e3 == dlock::error::closed));
  auto [e4] = co_await c.close(tuple);  // closing twice is fine
  BOOST_TEST(!e4);
  auto [e5, s5] = co_await c.wait_state_change(tuple);
  BOOST_TEST((e5 == dlock::error::closed));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_client)

BOOST_AUTO_TEST_CASE(every_operation_success_and_error_paths) {
  asio::io_context io;
  zk::client c(io.get_executor(), dlock::test::zk_options(dlock::test::zk_hosts()));
  run_coroutine(io, every_operation(c, base_path("ops")));
}

BOOST_AUTO_TEST_CASE(invalid_paths_are_rejected_locally) {
  asio::io_context io;
  zk::client c(io.get_executor(), dlock::test::zk_options(dlock::test::zk_hosts()));
  run_coroutine(io, invalid_paths(c));
}

BOOST_AUTO_TEST_CASE(operations_before_connect_and_after_close) {
  asio::io_context io;
  zk::client c(io.get_executor(), dlock::test::zk_options(dlock::test::zk_hosts()));
  run_coroutine(io, before_connect_and_after_close(c));
}

BOOST_AUTO_TEST_SUITE_END()
