// ZooKeeper path rules, checked before anything is sent.
#include <boost/test/unit_test.hpp>

#include <dlock/error.hpp>
#include <dlock/zk/path.hpp>

#include <string>

using dlock::zk::path_problem;
using dlock::zk::validate_path;

BOOST_AUTO_TEST_SUITE(zk_path)

BOOST_AUTO_TEST_CASE(valid_paths_pass) {
  for (const char* p : {"/", "/a", "/a/b", "/locks/lock-0000000001", "/a.b", "/..a", "/a/.b", "/zookeeper2"})
    BOOST_TEST(!validate_path(p), p);
}

BOOST_AUTO_TEST_CASE(invalid_paths_are_rejected_with_invalid_argument) {
  using namespace std::string_literals;
  for (std::string p : {""s, "a"s, "a/b"s, "/a/"s, "//"s, "/a//b"s, "/a/./b"s, "/a/../b"s, "/."s, "/a/.."s,
                        "/a\0b"s, "/a\nb"s, "/a\x7f"s}) {
    auto ec = validate_path(p);
    BOOST_TEST((ec == dlock::error::invalid_argument), "path of length " << p.size());
    BOOST_TEST(!path_problem(p).empty());
  }
}

BOOST_AUTO_TEST_CASE(sequential_prefix_may_end_with_a_slash) {
  BOOST_TEST(!validate_path("/locks/", true));
  BOOST_TEST((validate_path("/locks/", false) == dlock::error::invalid_argument));
  BOOST_TEST((validate_path("/locks//", true) == dlock::error::invalid_argument));
}

BOOST_AUTO_TEST_CASE(problems_read_like_sentences) {
  BOOST_TEST(path_problem("") == "the path is empty");
  BOOST_TEST(path_problem("x") == "the path does not start with '/'");
  BOOST_TEST(path_problem("/x/") == "the path ends with '/'");
  BOOST_TEST(path_problem("/a//b").find("empty component") != std::string_view::npos);
}

BOOST_AUTO_TEST_SUITE_END()
