// `dlock lock` when the lock is lost while CMD runs: the server is stopped
// (SIGSTOP), CMD gets SIGTERM (then SIGKILL after --grace) and dlock exits 121.
#include "integration/cli_support.hpp"

#include <boost/test/unit_test.hpp>

using namespace cli_test;

namespace {

// Resumes the paused servers whatever the test does. Not copyable: a copy
// (say, in a growing vector) would resume them early.
struct resume_guard {
  std::vector<std::string> names;
  explicit resume_guard(std::vector<std::string> paused) : names(std::move(paused)) {}
  ~resume_guard() {
    for (const auto& name : names) dlock::test::server_action("resume", name);
  }
  resume_guard(const resume_guard&) = delete;
  resume_guard& operator=(const resume_guard&) = delete;
};

// CMD: records SIGTERM and exits 0 on it (so only a loss can make dlock exit 121).
std::string exits_on_term(const scratch& dir) {
  return "trap 'echo TERM > \"" + dir.file("seen") + "\"; exit 0' TERM; touch '" + dir.file("held") + "'; " +
         until_signalled;
}

// CMD: records SIGTERM and carries on, so only SIGKILL ends it.
std::string ignores_term(const scratch& dir) {
  return "trap 'echo TERM > \"" + dir.file("seen") + "\"' TERM; touch '" + dir.file("held") +
         "'; while :; do sleep 0.1; done";
}

// dlock's stderr lines that report an error ("dlock: error: ..." from the library's log).
std::vector<std::string> error_lines(const std::string& path) {
  std::vector<std::string> out;
  for (auto& line : read_lines(path))
    if (line.find("error:") != std::string::npos) out.push_back(line);
  return out;
}

// On ZooKeeper, closing the session at exit deletes our node: a cleanup that
// the close makes moot (the release's delete, retried while the server is
// stopped) is no error to report.
void check_no_error_reported(const std::string& stderr_path) {
  auto reported = error_lines(stderr_path);
  BOOST_CHECK_MESSAGE(reported.empty(), "dlock reported: " << (reported.empty() ? "" : reported.front()));
}

void lose_the_lock(const backend& b, const std::string& server, const std::string& script,
                   std::vector<std::string> options, const scratch& dir) {
  auto holder = start_dlock(lock_args(b, lock_name(b, "loss"), script, std::move(options)), "/dev/null",
                            dir.file("stderr"));
  wait_for_file(dir.file("held"));
  resume_guard guard({server});
  dlock::test::server_action("pause", server);
  BOOST_CHECK_EQUAL(holder->wait(), 121);
  BOOST_CHECK_EQUAL(read_file(dir.file("seen")), "TERM\n");
  if (b.zk) check_no_error_reported(dir.file("stderr"));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_lock_loss)

BOOST_AUTO_TEST_CASE(zookeeper_server_stopped) {
  scratch dir;
  // A short session: the client suspends (a loss, under the default policy) soon after the server stops.
  lose_the_lock(lock_backends()[0], "zk", exits_on_term(dir), {"--session-timeout", "2s"}, dir);
}

BOOST_AUTO_TEST_CASE(redis_server_stopped_so_extension_fails) {
  scratch dir;
  backend b{"redis", {"--redis", redis_address(4)}, false};
  lose_the_lock(b, dlock::test::redis_name(4), exits_on_term(dir), {"--ttl", "2s"}, dir);
}

BOOST_AUTO_TEST_CASE(a_command_ignoring_sigterm_is_killed_after_the_grace_period) {
  scratch dir;
  backend b{"redis", {"--redis", redis_address(4)}, false};
  // dlock returns only once CMD was reaped: its exit proves the SIGKILL.
  lose_the_lock(b, dlock::test::redis_name(4), ignores_term(dir), {"--ttl", "2s", "--grace", "1s"}, dir);
}

BOOST_AUTO_TEST_CASE(redlock_loses_its_majority) {
  scratch dir;
  auto b = lock_backends()[2];
  auto holder = start_dlock(lock_args(b, lock_name(b, "loss"), exits_on_term(dir), {"--ttl", "2s"}));
  wait_for_file(dir.file("held"));
  std::vector<std::string> paused;
  for (std::size_t i = 0; i < 3; ++i) paused.push_back(dlock::test::redis_name(i));  // 3 of 5: no majority
  resume_guard guard(paused);
  for (const auto& name : paused) dlock::test::server_action("pause", name);
  BOOST_CHECK_EQUAL(holder->wait(), 121);
  BOOST_CHECK_EQUAL(read_file(dir.file("seen")), "TERM\n");
}

BOOST_AUTO_TEST_CASE(leadership_lost_when_zookeeper_stops) {
  scratch dir;
  auto path = "/dlock-test/" + dlock::test::unique_name("cli-elect-loss");
  auto leader = start_dlock({"elect", "--zk", dlock::test::zk_hosts(), path, "--id", "doomed", "--session-timeout", "2s",
                             "--", "sh", "-c", exits_on_term(dir)},
                            "/dev/null", dir.file("stderr"));
  wait_for_file(dir.file("held"));
  resume_guard guard({"zk"});
  dlock::test::server_action("pause", "zk");
  BOOST_CHECK_EQUAL(leader->wait(), 121);
  BOOST_CHECK_EQUAL(read_file(dir.file("seen")), "TERM\n");
  check_no_error_reported(dir.file("stderr"));
}

BOOST_AUTO_TEST_SUITE_END()
