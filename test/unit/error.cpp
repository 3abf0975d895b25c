#include <dlock/error.hpp>
#include <dlock/log.hpp>

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

BOOST_AUTO_TEST_SUITE(common_error)

BOOST_AUTO_TEST_CASE(every_code_has_a_readable_message) {
  for (int v = 1; v <= static_cast<int>(dlock::error::in_progress); ++v) {
    dlock::error_code ec = static_cast<dlock::error>(v);
    BOOST_TEST(std::string(ec.category().name()) == "dlock");
    BOOST_TEST(ec.message().find("unknown") == std::string::npos, "code " << v);
    BOOST_TEST(!ec.message().empty());
  }
  dlock::error_code lost = dlock::error::lost;
  BOOST_TEST((lost == dlock::error::lost));
  BOOST_TEST((lost != dlock::error::taken));
}

BOOST_AUTO_TEST_CASE(log_hook_receives_messages_at_or_above_its_level) {
  std::vector<std::string> seen;
  dlock::set_log_handler([&](dlock::log_level level, std::string_view m) {
    seen.push_back(std::string(dlock::to_string(level)) + ":" + std::string(m));
  }, dlock::log_level::warning);
  dlock::detail::log(dlock::log_level::info, "dropped");
  dlock::detail::log(dlock::log_level::error, "kept");
  BOOST_TEST(!dlock::detail::log_enabled(dlock::log_level::debug));
  dlock::set_log_handler(nullptr);
  dlock::detail::log(dlock::log_level::error, "after reset");
  BOOST_REQUIRE_EQUAL(seen.size(), 1u);
  BOOST_TEST(seen[0] == "error:kept");
}

BOOST_AUTO_TEST_SUITE_END()
