// `dlock elect`, `dlock leader` and `dlock queue` against the real ZooKeeper.
#include "integration/cli_support.hpp"

#include "common/zk_cutting_proxy.hpp"

#include <boost/test/unit_test.hpp>

using namespace cli_test;

namespace {

std::vector<std::string> zk_args(std::vector<std::string> head, std::vector<std::string> tail) {
  head.insert(head.end(), {"--zk", dlock::test::zk_hosts()});
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

std::vector<std::string> elect_args(const std::string& path, const std::string& id, const std::string& script,
                                    std::vector<std::string> extra = {}) {
  auto args = zk_args({"elect"}, {path, "--id", id});
  args.insert(args.end(), extra.begin(), extra.end());
  args.insert(args.end(), {"--", "sh", "-c", script});
  return args;
}

std::vector<std::string> queue_args(const std::string& path, std::vector<std::string> tail) {
  tail.insert(tail.begin(), path);
  return zk_args({"queue"}, tail);
}

std::vector<std::string> queue_args_via(const std::string& hosts, const std::string& path,
                                        std::vector<std::string> tail) {
  std::vector<std::string> args{"queue", "--zk", hosts, path};
  args.insert(args.end(), tail.begin(), tail.end());
  return args;
}

// A take stopped (by --timeout or a signal) while its item's removal is in
// flight: the item is printed (status 0) or left in the queue, never dropped.
void check_item_kept(int status, const std::string& printed, const std::string& path, const std::string& item) {
  BOOST_TEST_MESSAGE("take: status " << status << ", printed '" << printed << "'");
  if (printed.empty()) {
    scratch dir;
    auto out = dir.file("peek");
    BOOST_CHECK_EQUAL(run_dlock(queue_args(path, {"peek"}), out), 0);
    BOOST_CHECK_EQUAL(read_file(out), item + "\n");  // left in the queue
  } else {
    BOOST_CHECK_EQUAL(printed, item + "\n");
    BOOST_CHECK_EQUAL(status, 0);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_recipes)

BOOST_AUTO_TEST_CASE(elect_runs_one_leader_at_a_time_and_leader_follows) {
  scratch dir;
  auto path = "/dlock-test/" + dlock::test::unique_name("cli-election");
  auto watched = dir.file("watch");
  auto now = dir.file("leader");
  BOOST_CHECK_EQUAL(run_dlock(zk_args({"leader"}, {path}), now), 1);  // no leader yet
  BOOST_CHECK_EQUAL(read_file(now), "");
  auto watcher = start_dlock(zk_args({"leader"}, {path, "--watch"}), watched);
  wait_until([&] { return read_lines(watched).size() == 1; }, "the watcher's first line");

  auto alpha_env = dir.file("alpha-env");
  auto alpha = start_dlock(elect_args(path, "alpha",
                                      "echo \"$DLOCK_FENCING_TOKEN $DLOCK_LOCK_NAME\" > '" + alpha_env + "'; " +
                                          hold_until(dir.file("alpha-leads"), dir.file("alpha-go"))));
  wait_for_file(dir.file("alpha-leads"));
  auto beta = start_dlock(elect_args(path, "beta", hold_until(dir.file("beta-leads"), dir.file("beta-go"))));
  BOOST_CHECK_EQUAL(run_dlock(zk_args({"leader"}, {path}), now), 0);
  BOOST_CHECK_EQUAL(read_file(now), "alpha\n");
  BOOST_CHECK_EQUAL(run_dlock(elect_args(path, "gamma", "true", {"--timeout", "1s"})), 124);
  BOOST_CHECK(!std::filesystem::exists(dir.file("beta-leads")));  // alpha still leads

  wait_until([&] { return read_lines(watched).size() >= 2; }, "the watcher to see alpha");
  std::ofstream(dir.file("alpha-go")).put('\n');
  BOOST_CHECK_EQUAL(alpha->wait(), 0);
  wait_for_file(dir.file("beta-leads"));
  wait_until([&] { return read_lines(watched).size() >= 3; }, "the watcher to see beta");
  std::ofstream(dir.file("beta-go")).put('\n');
  BOOST_CHECK_EQUAL(beta->wait(), 0);
  wait_until([&] { return read_lines(watched).size() >= 4; }, "the watcher to see no leader");
  watcher->signal(SIGINT);
  BOOST_CHECK_EQUAL(watcher->wait(), 0);
  // One line per change: none, alpha, beta, none (an empty line is "no leader").
  BOOST_CHECK((read_lines(watched) == std::vector<std::string>{"", "alpha", "beta", ""}));

  auto env = read_lines(alpha_env);
  BOOST_REQUIRE_EQUAL(env.size(), 1u);
  BOOST_CHECK_EQUAL(env[0].substr(env[0].find(' ') + 1), path);
  BOOST_CHECK_GT(std::stoll(env[0]), 0);
}

BOOST_AUTO_TEST_CASE(elect_passes_the_command_status_through) {
  auto path = "/dlock-test/" + dlock::test::unique_name("cli-election");
  BOOST_CHECK_EQUAL(run_dlock(elect_args(path, "solo", "exit 9")), 9);
  BOOST_CHECK_EQUAL(run_dlock(zk_args({"leader"}, {path})), 1);  // resigned
}

BOOST_AUTO_TEST_CASE(queue_round_trip) {
  scratch dir;
  auto path = "/dlock-test/" + dlock::test::unique_name("cli-queue");
  auto out = dir.file("out");
  auto queue = [&](std::vector<std::string> tail) { return run_dlock(queue_args(path, std::move(tail)), out); };

  BOOST_CHECK_EQUAL(queue({"peek"}), 1);
  BOOST_CHECK_EQUAL(read_file(out), "");  // empty: nothing printed
  BOOST_CHECK_EQUAL(queue({"put", "first item"}), 0);
  BOOST_CHECK_EQUAL(queue({"put", "second"}), 0);
  BOOST_CHECK_EQUAL(queue({"size"}), 0);
  BOOST_CHECK_EQUAL(read_file(out), "2\n");
  BOOST_CHECK_EQUAL(queue({"peek"}), 0);
  BOOST_CHECK_EQUAL(read_file(out), "first item\n");
  BOOST_CHECK_EQUAL(queue({"take"}), 0);
  BOOST_CHECK_EQUAL(read_file(out), "first item\n");
  BOOST_CHECK_EQUAL(queue({"take", "--timeout", "5s"}), 0);
  BOOST_CHECK_EQUAL(read_file(out), "second\n");
  BOOST_CHECK_EQUAL(queue({"take", "--timeout", "500ms"}), 124);
  BOOST_CHECK_EQUAL(queue({"size"}), 0);
  BOOST_CHECK_EQUAL(read_file(out), "0\n");
}

// The take usually starts waiting before the put arrives (nothing here forces it).
BOOST_AUTO_TEST_CASE(queue_take_gets_an_item_put_by_another_process) {
  scratch dir;
  auto path = "/dlock-test/" + dlock::test::unique_name("cli-queue");
  auto taken = dir.file("taken");
  auto taker = start_dlock(queue_args(path, {"take"}), taken);
  BOOST_CHECK_EQUAL(run_dlock(queue_args(path, {"put", "late"})), 0);
  BOOST_CHECK_EQUAL(taker->wait(), 0);
  BOOST_CHECK_EQUAL(read_file(taken), "late\n");
}

BOOST_AUTO_TEST_CASE(queue_take_timing_out_during_the_removal_keeps_the_item) {
  scratch dir;
  auto path = "/dlock-test/" + dlock::test::unique_name("cli-queue");
  dlock::test::zk_cutting_proxy proxy(dlock::test::zk_hosts());
  BOOST_CHECK_EQUAL(run_dlock(queue_args(path, {"put", "x"})), 0);
  proxy.hold_replies(dlock::test::zk_opcode::remove, 2s);  // the removal outlives the timeout
  auto out = dir.file("out");
  int status = run_dlock(queue_args_via(proxy.address(), path, {"take", "--timeout", "1s"}), out);
  BOOST_CHECK_EQUAL(proxy.cuts(), 1);  // the removal was under way when the timeout fired
  check_item_kept(status, read_file(out), path, "x");
}

BOOST_AUTO_TEST_CASE(queue_take_stopped_by_a_signal_during_the_removal_keeps_the_item) {
  scratch dir;
  auto path = "/dlock-test/" + dlock::test::unique_name("cli-queue");
  dlock::test::zk_cutting_proxy proxy(dlock::test::zk_hosts());
  BOOST_CHECK_EQUAL(run_dlock(queue_args(path, {"put", "y"})), 0);
  proxy.hold_replies(dlock::test::zk_opcode::remove, 2s);
  auto out = dir.file("out");
  auto taker = start_dlock(queue_args_via(proxy.address(), path, {"take"}), out);
  wait_until([&] { return proxy.forwarded(dlock::test::zk_opcode::remove) == 1; }, "the take's removal");
  taker->signal(SIGTERM);
  int status = taker->wait();
  check_item_kept(status, read_file(out), path, "y");
}

BOOST_AUTO_TEST_SUITE_END()
