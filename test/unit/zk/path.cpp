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

// ZooKeeper's own character rules (PathUtils.validatePath, on the UTF-16 the
// server decodes): refused here too, before a lock creates its parents.
BOOST_AUTO_TEST_CASE(characters_the_server_refuses_are_refused_here) {
  using namespace std::string_literals;
  for (std::string p : {"/a\xc2\x85"s,          // U+0085, a C1 control
                        "/a\xc2\x9f"s,          // U+009F
                        "/a\xed\x9f\xbf\xee\x80\x80"s,  // U+E000 (private use), after U+D7FF
                        "/a\xef\xa3\xbf"s,      // U+F8FF
                        "/a\xef\xbf\xb0"s,      // U+FFF0
                        "/a\xef\xbf\xbf"s,      // U+FFFF
                        "/a\xf0\x9f\x98\x80"s,  // U+1F600: a surrogate pair in Java
                        "/a\xff"s, "/a\x80"s, "/a\xc0\xaf"s, "/a\xe0\x80\xaf"s, "/a\xe6\x97"s, "/a\xf5\x80\x80\x80"s}) {
    BOOST_TEST((validate_path(p) == dlock::error::invalid_argument), "path of length " << p.size());
    BOOST_TEST(!path_problem(p).empty());
  }
  for (std::string p : {"/\xc2\xa0"s,          // U+00A0, the first character after the C1 controls
                        "/\xc3\xbc-\xe6\x97\xa5"s,  // ü, 日
                        "/\xed\x9f\xbf"s,      // U+D7FF, the last before the surrogates
                        "/\xef\xa4\x80"s,      // U+F900, the first after the private use area
                        "/\xef\xbf\xaf"s}) {   // U+FFEF, the last before U+FFF0
    BOOST_TEST(!validate_path(p), "path of length " << p.size());
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
