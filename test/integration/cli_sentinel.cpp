// `dlock lock --sentinel ... --master-name ...` against the real Sentinel set
// of scripts/servers: the command runs under the lock on the master the
// sentinels name, with its fencing token; a failover while it runs is a
// loss, so dlock exits with status 121; bad arguments are usage errors.
#include "cli_support.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

using namespace cli_test;

namespace {

std::string sentinels_argument() {
  std::string out;
  for (const auto& s : dlock::test::sentinels()) out += (out.empty() ? "" : ",") + s.host + ":" + std::to_string(s.port);
  return out;
}

backend sentinel_backend() {
  return {"sentinel", {"--sentinel", sentinels_argument(), "--master-name", dlock::test::sentinel_master_name()}};
}

void settle() { dlock::test::server_action("settle", ""); }

// What the first sentinel answers, as redis-cli prints it (it exits 0 on an
// error reply too).
std::string ask_sentinel(const std::string& arguments) {
  auto s = dlock::test::sentinels()[0];
  std::string command = "redis-cli -h " + s.host + " -p " + std::to_string(s.port) + " " + arguments;
  std::unique_ptr<FILE, int (*)(FILE*)> out(popen(command.c_str(), "r"), pclose);
  BOOST_REQUIRE(out);
  std::string text;
  char chunk[256];
  while (auto n = std::fread(chunk, 1, sizeof chunk, out.get())) text.append(chunk, n);
  return text;
}

std::string named_master() {
  return ask_sentinel("SENTINEL GET-MASTER-ADDR-BY-NAME " + dlock::test::sentinel_master_name());
}

// SENTINEL FAILOVER through the first sentinel, until the sentinels name
// another master. A manual failover may abort (the replica chosen is slow
// to take its promotion under load: -failover-abort-slave-timeout), and the
// old master then stays: the set is settled and asked again.
void fail_over() {
  for (int attempt = 1;; ++attempt) {
    auto before = named_master();
    auto reply = ask_sentinel("SENTINEL FAILOVER " + dlock::test::sentinel_master_name());
    bool moved = false;
    auto deadline = std::chrono::steady_clock::now() + 15s;  // past the failover timeout (4 s)
    while (reply.rfind("OK", 0) == 0 && !moved && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(100ms);
      moved = named_master() != before;
    }
    if (moved) return;
    BOOST_TEST_MESSAGE("failover " << attempt << " did not happen: " << reply);
    BOOST_REQUIRE_MESSAGE(attempt < 3, "the sentinels did not fail over: " + reply);
    settle();
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_command_runs_under_the_lock_with_its_fencing_token) {
  settle();
  scratch dir;
  auto b = sentinel_backend();
  auto name = dlock::test::unique_name("dlock-test:cli-sentinel");
  auto status = run_dlock(lock_args(b, name, "echo \"$DLOCK_FENCING_TOKEN\" > '" + dir.file("token") + "'"));
  BOOST_CHECK_EQUAL(status, 0);
  BOOST_CHECK_GT(std::stoll(read_file(dir.file("token"))), 0);
}

BOOST_AUTO_TEST_CASE(a_failover_while_the_command_runs_exits_121) {
  settle();
  scratch dir;
  auto b = sentinel_backend();
  auto name = dlock::test::unique_name("dlock-test:cli-sentinel");
  auto holder = start_dlock(lock_args(b, name, hold_until(dir.file("a"), dir.file("never")), {"--grace", "1s"}),
                            "/dev/null", dir.file("stderr"));
  wait_for_file(dir.file("a"));
  fail_over();
  BOOST_CHECK_EQUAL(holder->wait(), 121);
  BOOST_CHECK_MESSAGE(read_file(dir.file("stderr")).find("failed over") != std::string::npos,
                      read_file(dir.file("stderr")));
  settle();
}

BOOST_AUTO_TEST_CASE(sentinel_arguments_that_do_not_fit_are_usage_errors) {
  auto name = dlock::test::unique_name("dlock-test:cli-sentinel");
  BOOST_CHECK_EQUAL(run_dlock({"lock", "--sentinel", sentinels_argument(), name, "--", "true"}), 2);  // no name
  BOOST_CHECK_EQUAL(run_dlock({"lock", "--sentinel", "nohostport", "--master-name", "m", name, "--", "true"}), 2);
  BOOST_CHECK_EQUAL(run_dlock({"lock", "--redis", "127.0.0.1:1", "--master-name", "m", name, "--", "true"}), 2);
  BOOST_CHECK_EQUAL(run_dlock({"lock", "--redis", "127.0.0.1:1", "--sentinel-user", "u", name, "--", "true"}), 2);
  // A name no sentinel knows: dlock cannot connect (125).
  BOOST_CHECK_EQUAL(run_dlock({"lock", "--sentinel", sentinels_argument(), "--master-name", "no-such-master",
                               "--connect-timeout", "1s", name, "--", "true"}),
                    125);
}
