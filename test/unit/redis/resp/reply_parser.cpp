// The RESP2 parser (hiredis's reader building dlock::redis::reply in place),
// without any server.
#include "redis/resp/reply_parser.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <string_view>
#include <vector>

using namespace std::literals;
using dlock::redis::reply;
using dlock::redis::detail::reply_parser;
using kind = reply::kind;
using result = reply_parser::result;

namespace {

// Every complete reply in `bytes`, fed in one piece.
std::vector<reply> parse(reply_parser& parser, std::string_view bytes) {
  parser.feed(bytes.data(), bytes.size());
  std::vector<reply> out;
  for (reply r; parser.next(r) == result::reply;) out.push_back(std::move(r));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_kind_of_reply) {
  reply_parser parser;
  auto replies = parse(parser, "+OK\r\n-ERR no\r\n:-42\r\n$3\r\na\0b\r\n$-1\r\n*2\r\n:1\r\n$1\r\nx\r\n*-1\r\n"sv);
  BOOST_REQUIRE_EQUAL(replies.size(), 7u);
  BOOST_TEST(replies[0].is_ok());
  BOOST_TEST((replies[1].type() == kind::error && replies[1].string() == "ERR no"));
  BOOST_TEST((replies[2].is_integer() && replies[2].integer() == -42));
  BOOST_TEST((replies[3].is_bulk() && replies[3].string() == "a\0b"sv));  // binary-safe
  BOOST_TEST(replies[4].is_nil());
  BOOST_REQUIRE(replies[5].is_array());
  BOOST_REQUIRE_EQUAL(replies[5].elements().size(), 2u);
  BOOST_TEST(replies[5].elements()[0].integer() == 1);
  BOOST_TEST(replies[5].elements()[1].string() == "x");
  BOOST_TEST(replies[6].is_nil());
}

// Replies are built in one slot that is reused: nothing of an earlier reply
// (its text, its elements, its integer) may show through a later one.
BOOST_AUTO_TEST_CASE(a_reply_carries_nothing_of_the_one_before) {
  reply_parser parser;
  std::string long_bulk(100, 'v');
  auto replies = parse(parser, "$100\r\n" + long_bulk + "\r\n+OK\r\n*1\r\n+a\r\n:7\r\n$-1\r\n+\r\n*0\r\n");
  BOOST_REQUIRE_EQUAL(replies.size(), 7u);
  BOOST_TEST(replies[0].string() == long_bulk);
  BOOST_TEST((replies[1].is_ok() && replies[1].elements().empty()));
  BOOST_TEST((replies[2].is_array() && replies[2].string().empty() && replies[2].elements().size() == 1u));
  BOOST_TEST((replies[3].is_integer() && replies[3].integer() == 7 && replies[3].string().empty() &&
              replies[3].elements().empty()));
  BOOST_TEST((replies[4].is_nil() && replies[4].integer() == 0 && replies[4].string().empty()));
  BOOST_TEST((replies[5].is_status() && replies[5].string().empty() && replies[5].integer() == 0));
  BOOST_TEST((replies[6].is_array() && replies[6].elements().empty()));
}

BOOST_AUTO_TEST_CASE(nested_arrays) {
  reply_parser parser;
  auto replies = parse(parser, "*2\r\n*2\r\n:1\r\n$-1\r\n*1\r\n-ERR in\r\n"sv);
  BOOST_REQUIRE_EQUAL(replies.size(), 1u);
  const auto& outer = replies[0].elements();
  BOOST_REQUIRE_EQUAL(outer.size(), 2u);
  BOOST_REQUIRE_EQUAL(outer[0].elements().size(), 2u);
  BOOST_TEST(outer[0].elements()[0].integer() == 1);
  BOOST_TEST(outer[0].elements()[1].is_nil());
  BOOST_REQUIRE_EQUAL(outer[1].elements().size(), 1u);
  BOOST_TEST(outer[1].elements()[0].is_error());
}

// A read may end anywhere: inside a length, a string, or between the
// elements of an array.
BOOST_AUTO_TEST_CASE(a_reply_split_at_every_byte) {
  const std::string bytes = "*3\r\n$5\r\nhello\r\n:12\r\n+OK\r\n$2\r\nhi\r\n";
  for (std::size_t cut = 0; cut <= bytes.size(); ++cut) {
    reply_parser parser;
    auto first = parse(parser, std::string_view(bytes).substr(0, cut));
    auto rest = parse(parser, std::string_view(bytes).substr(cut));
    first.insert(first.end(), rest.begin(), rest.end());
    BOOST_REQUIRE_EQUAL(first.size(), 2u);
    BOOST_TEST(first[0].elements().size() == 3u);
    BOOST_TEST(first[0].elements()[0].string() == "hello");
    BOOST_TEST(first[0].elements()[1].integer() == 12);
    BOOST_TEST(first[0].elements()[2].is_ok());
    BOOST_TEST(first[1].string() == "hi");
  }
}

BOOST_AUTO_TEST_CASE(bytes_that_are_not_resp_are_a_protocol_error) {
  reply_parser parser;
  parser.feed("?what\r\n", 7);
  reply r;
  BOOST_TEST((parser.next(r) == result::protocol_error));
}

BOOST_AUTO_TEST_CASE(reset_forgets_a_partial_reply) {
  reply_parser parser;
  BOOST_TEST(parse(parser, "*2\r\n:1\r\n"sv).empty());
  parser.reset();
  auto replies = parse(parser, "+OK\r\n"sv);
  BOOST_REQUIRE_EQUAL(replies.size(), 1u);
  BOOST_TEST(replies[0].is_ok());
}
