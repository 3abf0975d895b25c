// The Redis side's I/O-free pieces: the pipelining queue, command encoding,
// SHA1 for EVALSHA, command checks, reply interpretation.
#include <dlock/error.hpp>
#include <dlock/redis/command.hpp>
#include "redis/resp/command_check.hpp"
#include "redis/connection/request.hpp"
#include "redis/locks/algorithm/replies.hpp"
#include "redis/locks/token.hpp"
#include <dlock/redis/script.hpp>

#include <boost/test/unit_test.hpp>

#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace redis = dlock::redis;
using namespace std::chrono_literals;

namespace {
struct item {
  int id;
  bool abandoned = false;
};
using item_ptr = std::shared_ptr<item>;
bool skip_abandoned(const item_ptr& p) { return p->abandoned; }
}  // namespace

BOOST_AUTO_TEST_SUITE(redis_logic)

BOOST_AUTO_TEST_CASE(queue_stages_everything_waiting_into_one_batch_in_order) {
  redis::detail::request_queue<item_ptr> q;
  for (int i = 0; i < 5; ++i) q.push(std::make_shared<item>(item{i}));
  std::vector<item_ptr> batch;
  BOOST_CHECK_EQUAL(q.stage(batch, skip_abandoned), 5u);
  BOOST_CHECK(!q.has_waiting());
  BOOST_CHECK_EQUAL(q.in_flight_size(), 5u);
  for (int i = 0; i < 5; ++i) BOOST_CHECK_EQUAL(batch[std::size_t(i)]->id, i);
  // Replies are matched first-in first-out.
  for (int i = 0; i < 5; ++i) BOOST_CHECK_EQUAL(q.pop_answered()->id, i);
  BOOST_CHECK(!q.pop_answered());  // a reply nobody asked for
  BOOST_CHECK(q.empty());
}

BOOST_AUTO_TEST_CASE(queue_drops_requests_abandoned_before_being_written) {
  redis::detail::request_queue<item_ptr> q;
  std::vector<item_ptr> items;
  for (int i = 0; i < 4; ++i) {
    items.push_back(std::make_shared<item>(item{i}));
    q.push(items.back());
  }
  items[1]->abandoned = true;
  std::vector<item_ptr> batch;
  BOOST_CHECK_EQUAL(q.stage(batch, skip_abandoned), 3u);
  BOOST_CHECK_EQUAL(q.pop_answered()->id, 0);
  BOOST_CHECK_EQUAL(q.pop_answered()->id, 2);  // 1 was never sent: no reply to expect
  // An in-flight request abandoned later still takes its reply (dropped by the caller).
  items[3]->abandoned = true;
  BOOST_CHECK_EQUAL(q.pop_answered()->id, 3);
}

BOOST_AUTO_TEST_CASE(queue_drain_hands_back_in_flight_then_waiting) {
  redis::detail::request_queue<item_ptr> q;
  q.push(std::make_shared<item>(item{0}));
  std::vector<item_ptr> batch;
  q.stage(batch, skip_abandoned);
  q.push(std::make_shared<item>(item{1}));
  std::vector<int> order;
  q.drain([&](item_ptr& p) { order.push_back(p->id); });
  BOOST_CHECK((order == std::vector<int>{0, 1}));
  BOOST_CHECK(q.empty());
}

BOOST_AUTO_TEST_CASE(command_encoding_is_binary_safe_resp) {
  std::string odd("a\0b\r\n", 5);
  redis::command c{"SET", odd, ""};
  c.arg(-42);
  BOOST_CHECK_EQUAL(c.size(), 4u);
  static const char expected[] = "*4\r\n$3\r\nSET\r\n$5\r\na\0b\r\n\r\n$0\r\n\r\n$3\r\n-42\r\n";
  BOOST_CHECK_EQUAL(c.encoded(), std::string(expected, sizeof expected - 1));
  redis::command variadic("GET", std::string("k"));
  BOOST_CHECK_EQUAL(variadic.encoded(), "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
  redis::command from_vector(std::vector<std::string>{"PING"});
  BOOST_CHECK_EQUAL(from_vector.encoded(), "*1\r\n$4\r\nPING\r\n");
}

BOOST_AUTO_TEST_CASE(sha1_matches_known_digests) {
  BOOST_CHECK_EQUAL(redis::sha1_hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  BOOST_CHECK_EQUAL(redis::sha1_hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  BOOST_CHECK_EQUAL(redis::sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
                    "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  BOOST_CHECK_EQUAL(redis::sha1_hex(std::string(1000000, 'a')), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
  redis::script s("return 1");
  BOOST_CHECK_EQUAL(s.sha1(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");  // redis-cli SCRIPT LOAD "return 1"
}

// F12c: a command failed by a broken byte stream may have run on the server.
BOOST_AUTO_TEST_CASE(set_outcome_is_unknown_after_any_failure_that_may_follow_the_write) {
  using dlock::redis::detail::set_outcome_unknown;
  for (dlock::error_code ec : {dlock::error_code(boost::asio::error::operation_aborted),
                               make_error_code(dlock::redis::error::timed_out),
                               make_error_code(dlock::redis::error::connection_lost),
                               make_error_code(dlock::redis::error::protocol_error),
                               make_error_code(dlock::error::closed)})
    BOOST_TEST(set_outcome_unknown(ec), ec.message());
  // Refused before sending, or answered by the server: nothing to undo.
  for (dlock::error_code ec : {make_error_code(dlock::redis::error::not_connected),
                               make_error_code(dlock::redis::error::server_error),
                               make_error_code(dlock::error::invalid_argument)})
    BOOST_TEST(!set_outcome_unknown(ec), ec.message());
}

BOOST_AUTO_TEST_CASE(bad_key_or_ttl_is_invalid_argument) {
  BOOST_CHECK(redis::detail::validate("", 1000ms) == dlock::error::invalid_argument);
  BOOST_CHECK(redis::detail::validate("k", 0ms) == dlock::error::invalid_argument);
  BOOST_CHECK(redis::detail::validate("k", -1ms) == dlock::error::invalid_argument);
  BOOST_CHECK(!redis::detail::validate("k", 1ms));
}

BOOST_AUTO_TEST_CASE(replies_are_interpreted) {
  using redis::reply;
  using redis::detail::set_outcome;
  BOOST_CHECK(redis::detail::interpret_set(reply::make_status("OK")) == set_outcome::acquired);
  BOOST_CHECK(redis::detail::interpret_set(reply::make_nil()) == set_outcome::taken);
  BOOST_CHECK(redis::detail::interpret_set(reply::make_integer(1)) == set_outcome::unexpected);
  BOOST_CHECK(!redis::detail::interpret_compare_script(reply::make_integer(1)));
  BOOST_CHECK(redis::detail::interpret_compare_script(reply::make_integer(0)) == dlock::error::not_owned);
  BOOST_CHECK(redis::detail::interpret_compare_script(reply::make_bulk("x")) == redis::error::protocol_error);
}

BOOST_AUTO_TEST_CASE(tokens_are_128_bit_hex_and_never_repeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 10000; ++i) {
    auto t = redis::detail::make_token();
    BOOST_REQUIRE_EQUAL(t.size(), 32u);
    BOOST_REQUIRE(t.find_first_not_of("0123456789abcdef") == std::string::npos);
    seen.insert(t);
  }
  BOOST_CHECK_EQUAL(seen.size(), 10000u);
}

BOOST_AUTO_TEST_CASE(queue_sends_a_retried_request_before_the_waiting_ones) {
  redis::detail::request_queue<item_ptr> q;
  q.push(std::make_shared<item>(item{0}));
  std::vector<item_ptr> batch;
  q.stage(batch, skip_abandoned);
  auto answered = q.pop_answered();  // nothing in flight after it: it may go again, first
  q.push(std::make_shared<item>(item{1}));
  q.push_first(answered);
  BOOST_CHECK_EQUAL(q.size(), 2u);
  batch.clear();
  q.stage(batch, skip_abandoned);
  BOOST_REQUIRE_EQUAL(batch.size(), 2u);
  BOOST_CHECK_EQUAL(batch[0]->id, 0);
  BOOST_CHECK_EQUAL(batch[1]->id, 1);
}

namespace {
bool refused(const redis::command& c) { return redis::detail::refused_command(c.encoded()); }
}  // namespace

BOOST_AUTO_TEST_CASE(commands_without_exactly_one_reply_are_recognised) {
  BOOST_CHECK(refused(redis::command()));
  for (const char* name : {"SUBSCRIBE", "psubscribe", "SSubscribe", "UNSUBSCRIBE", "punsubscribe", "SUNSUBSCRIBE",
                           "MONITOR", "SYNC", "psync", "REPLCONF", "RESET", "multi", "SELECT", "select"})
    BOOST_CHECK_MESSAGE(refused(redis::command(name, "x")) && refused(redis::command(name)), name);
  BOOST_CHECK(refused(redis::command("CLIENT", "REPLY", "OFF")));
  BOOST_CHECK(refused(redis::command("client", "reply", "skip")));
  BOOST_CHECK(refused(redis::command("CLIENT", "Reply", "ON")));
  BOOST_CHECK(refused(redis::command("HELLO", "3")));
  BOOST_CHECK(refused(redis::command("hello", "3", "AUTH", "u", "p")));
  // One reply each: allowed.
  for (const char* name : {"GET", "SET", "QUIT", "PING", "EXEC", "WATCH", "EVALSHA", "PUBLISH", "SUBSCRIBED",
                           "SUBSCRIB", "XREAD", "BLPOP", "WAIT", "", "MONITORS", "SPUBLISH"})
    BOOST_CHECK_MESSAGE(!refused(redis::command(name, "x")), name);
  BOOST_CHECK(!refused(redis::command("CLIENT", "ID")));
  BOOST_CHECK(!refused(redis::command("CLIENT")));
  BOOST_CHECK(!refused(redis::command("CLIENT", "REPLYX")));
  BOOST_CHECK(!refused(redis::command("HELLO")));
  BOOST_CHECK(!refused(redis::command("HELLO", "2", "SETNAME", "n")));
  // A key or value that looks like a refused name is just data.
  BOOST_CHECK(!refused(redis::command("SET", "SUBSCRIBE", "MONITOR")));
  std::string binary("MONITOR\0", 8);
  BOOST_CHECK(!refused(redis::command(std::string_view(binary))));
}

BOOST_AUTO_TEST_SUITE_END()
