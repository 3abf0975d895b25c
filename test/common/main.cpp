// The one Boost.Test main shared by every test program.
#define BOOST_TEST_MODULE dlock
#include <boost/test/unit_test.hpp>

#include <dlock/log.hpp>

#include <cstdlib>
#include <iostream>

namespace {

// DLOCK_TEST_LOG=debug|info|warning|error routes dlock's log (and the
// ZooKeeper C client's) to stderr, for debugging a failing test.
struct log_to_stderr {
  log_to_stderr() {
    const char* level = std::getenv("DLOCK_TEST_LOG");
    if (!level || !*level) return;
    std::string_view l(level);
    auto min = l == "debug" ? dlock::log_level::debug
               : l == "warning" ? dlock::log_level::warning
               : l == "error" ? dlock::log_level::error
                              : dlock::log_level::info;
    dlock::set_log_handler([](dlock::log_level lv, std::string_view m) {
      std::cerr << "[" << dlock::to_string(lv) << "] " << m << "\n";
    }, min);
  }
};

}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(log_to_stderr);
