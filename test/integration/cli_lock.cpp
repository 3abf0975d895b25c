// `dlock lock` against the real servers: mutual exclusion between processes,
// exit statuses, the timeout, signal forwarding and CMD's environment.
#include "integration/cli_support.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <set>

using namespace cli_test;

namespace {

// Each CMD appends "begin <pid>", sleeps, appends "end <pid>": under a lock
// the file is a sequence of begin/end pairs of one pid each.
void check_no_interleaving(const std::vector<std::string>& lines, std::size_t holders) {
  BOOST_REQUIRE_EQUAL(lines.size(), 2 * holders);
  std::set<std::string> pids;
  for (std::size_t i = 0; i < lines.size(); i += 2) {
    BOOST_REQUIRE_MESSAGE(lines[i].starts_with("begin "), "line " << i << ": " << lines[i]);
    std::string pid = lines[i].substr(6);
    BOOST_CHECK_MESSAGE(lines[i + 1] == "end " + pid, "interleaved: '" << lines[i] << "' then '" << lines[i + 1] << "'");
    pids.insert(pid);
  }
  BOOST_CHECK_EQUAL(pids.size(), holders);
}

void eight_processes_take_turns(const backend& b) {
  BOOST_TEST_CONTEXT(b.label) {
    scratch dir;
    auto log = dir.file("log");
    auto name = lock_name(b, "turns");
    std::string script = "echo begin $$ >> '" + log + "'; sleep 0.2; echo end $$ >> '" + log + "'";
    std::vector<std::unique_ptr<process>> holders;
    for (int i = 0; i < 8; ++i) holders.push_back(start_dlock(lock_args(b, name, script)));
    for (auto& p : holders) BOOST_CHECK_EQUAL(p->wait(), 0);
    check_no_interleaving(read_lines(log), holders.size());
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_lock)

BOOST_AUTO_TEST_CASE(mutual_exclusion_on_zookeeper) { eight_processes_take_turns(lock_backends()[0]); }
BOOST_AUTO_TEST_CASE(mutual_exclusion_on_one_redis) { eight_processes_take_turns(lock_backends()[1]); }
BOOST_AUTO_TEST_CASE(mutual_exclusion_on_redlock) { eight_processes_take_turns(lock_backends()[2]); }

// Two holders of a semaphore of two leases at once; a third is refused
// while they hold, and gets in after they left.
void two_permits_hold_at_once(const backend& b) {
  BOOST_TEST_CONTEXT(b.label) {
    scratch dir;
    auto name = lock_name(b, "permits");
    std::vector<std::string> two{"--permits", "2"};
    auto first = start_dlock(lock_args(b, name, hold_until(dir.file("a"), dir.file("go")), two));
    auto second = start_dlock(lock_args(b, name, hold_until(dir.file("b"), dir.file("go")), two));
    wait_for_file(dir.file("a"));
    wait_for_file(dir.file("b"));
    BOOST_CHECK_EQUAL(run_dlock(lock_args(b, name, "true", {"--permits", "2", "--timeout", "0"})), 124);
    std::ofstream(dir.file("go")).put('\n');
    BOOST_CHECK_EQUAL(first->wait(), 0);
    BOOST_CHECK_EQUAL(second->wait(), 0);
    BOOST_CHECK_EQUAL(run_dlock(lock_args(b, name, "true", {"--permits", "2", "--timeout", "5s"})), 0);
  }
}

// Six processes on two leases, each logging its entry and exit: never more than two inside.
void two_permits_bound_six(const backend& b) {
  BOOST_TEST_CONTEXT(b.label) {
    scratch dir;
    auto log = dir.file("log");
    auto name = lock_name(b, "permits-bound");
    std::string script = "echo begin >> '" + log + "'; sleep 0.2; echo end >> '" + log + "'";
    std::vector<std::unique_ptr<process>> holders;
    for (int i = 0; i < 6; ++i) holders.push_back(start_dlock(lock_args(b, name, script, {"--permits", "2"})));
    for (auto& p : holders) BOOST_CHECK_EQUAL(p->wait(), 0);
    auto lines = read_lines(log);
    BOOST_CHECK_EQUAL(lines.size(), 12u);
    int inside = 0, most = 0;
    for (const auto& line : lines) {
      inside += line == "begin" ? 1 : -1;
      most = std::max(most, inside);
    }
    BOOST_CHECK_EQUAL(inside, 0);
    BOOST_CHECK_LE(most, 2);
  }
}

BOOST_AUTO_TEST_CASE(permits_let_n_commands_run_at_once) {
  two_permits_hold_at_once(lock_backends()[0]);  // ZooKeeper
  two_permits_hold_at_once(lock_backends()[1]);  // one Redis server
}

BOOST_AUTO_TEST_CASE(permits_bound_how_many_run) {
  two_permits_bound_six(lock_backends()[0]);
  two_permits_bound_six(lock_backends()[1]);
}

BOOST_AUTO_TEST_CASE(permits_are_refused_where_they_cannot_work) {
  auto one = lock_backends()[1];
  auto name = lock_name(one, "permits-bad");
  for (std::string bad : {"0", "-1", "x"})
    BOOST_CHECK_EQUAL(run_dlock(lock_args(one, name, "true", {"--permits", bad})), 2);
  BOOST_CHECK_EQUAL(run_dlock(lock_args(lock_backends()[2], name, "true", {"--permits", "2"})), 2);  // Redlock
  BOOST_CHECK_EQUAL(run_dlock(lock_args(lock_backends()[0], "/dlock-test/p", "true", {"--permits", "2", "--shared"})), 2);
}

BOOST_AUTO_TEST_CASE(readers_share_the_zookeeper_lock) {
  // Two --shared holders at once: the second starts while the first still holds.
  auto b = lock_backends()[0];
  scratch dir;
  auto name = lock_name(b, "shared");
  auto first = start_dlock(lock_args(b, name, hold_until(dir.file("a"), dir.file("go")), {"--shared"}));
  wait_for_file(dir.file("a"));
  BOOST_CHECK_EQUAL(run_dlock(lock_args(b, name, "true", {"--shared", "--timeout", "60s"})), 0);
  // ... but a writer-style exclusive holder does not get in.
  BOOST_CHECK_EQUAL(run_dlock(lock_args(b, name, "true", {"--timeout", "0"})), 124);
  std::ofstream(dir.file("go")).put('\n');
  BOOST_CHECK_EQUAL(first->wait(), 0);
}

// --stats: one JSON line on stderr, after the command, on every backend.
BOOST_AUTO_TEST_CASE(stats_tell_the_wait_and_the_hold) {
  for (const auto& b : lock_backends()) {
    BOOST_TEST_CONTEXT(b.label) {
      scratch dir;
      auto name = lock_name(b, "stats");
      auto out = dir.file("out"), err = dir.file("err");
      BOOST_CHECK_EQUAL(run_dlock(lock_args(b, name, "echo ran; sleep 0.3", {"--stats"}), out, err), 0);
      BOOST_TEST(read_file(out) == "ran\n", "stdout is the command's alone");
      auto lines = read_lines(err);
      BOOST_REQUIRE(!lines.empty());
      const auto& line = lines.back();
      BOOST_TEST_MESSAGE(line);
      BOOST_TEST(line.find("\"name\":\"" + name + "\"") != std::string::npos, line);
      BOOST_TEST(line.find("\"outcome\":\"ok\"") != std::string::npos, line);
      BOOST_TEST(line.find("\"ended\":\"released\"") != std::string::npos, line);
      BOOST_TEST(line.find("\"reason\":null") != std::string::npos, line);
      auto held_at = line.find("\"held_ms\":");
      BOOST_REQUIRE(held_at != std::string::npos);
      BOOST_TEST(std::stod(line.substr(held_at + 10)) >= 300.0, line);
    }
  }
}

BOOST_AUTO_TEST_CASE(command_status_is_passed_through) {
  for (const auto& b : lock_backends()) {
    BOOST_TEST_CONTEXT(b.label) {
      auto name = lock_name(b, "status");
      BOOST_CHECK_EQUAL(run_dlock(lock_args(b, name, "exit 0")), 0);
      BOOST_CHECK_EQUAL(run_dlock(lock_args(b, name, "exit 42")), 42);
      BOOST_CHECK_EQUAL(run_dlock(lock_args(b, name, "kill -KILL $$")), 128 + SIGKILL);
    }
  }
}

BOOST_AUTO_TEST_CASE(command_not_found_or_not_executable) {
  auto b = lock_backends()[0];
  auto name = lock_name(b, "exec");
  BOOST_CHECK_EQUAL(run_dlock({"lock", "--zk", dlock::test::zk_hosts(), name, "--", "dlock-no-such-command"}), 127);
  BOOST_CHECK_EQUAL(run_dlock({"lock", "--zk", dlock::test::zk_hosts(), name, "--", "/dev/null"}), 126);
  // The lock was released each time: it is free now.
  BOOST_CHECK_EQUAL(run_dlock(lock_args(b, name, "true", {"--timeout", "0"})), 0);
}

BOOST_AUTO_TEST_CASE(timeout_while_another_process_holds) {
  for (const auto& b : lock_backends()) {
    BOOST_TEST_CONTEXT(b.label) {
      scratch dir;
      auto name = lock_name(b, "timeout");
      auto holder = start_dlock(lock_args(b, name, hold_until(dir.file("held"), dir.file("release"))));
      wait_for_file(dir.file("held"));
      auto ran = dir.file("ran");
      auto errors = dir.file("stderr");
      BOOST_CHECK_EQUAL(run_dlock(lock_args(b, name, "touch '" + ran + "'", {"--timeout", "1s"}), "/dev/null", errors), 124);
      BOOST_CHECK_EQUAL(run_dlock(lock_args(b, name, "touch '" + ran + "'", {"--timeout", "0"})), 124);
      BOOST_CHECK(!std::filesystem::exists(ran));
      auto message = read_lines(errors);
      BOOST_CHECK_EQUAL(message.size(), 1u);  // one line, naming the lock
      if (!message.empty()) BOOST_CHECK(message[0].find(name) != std::string::npos);
      std::ofstream(dir.file("release")).put('\n');
      BOOST_CHECK_EQUAL(holder->wait(), 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(signals_are_forwarded_and_the_lock_released) {
  for (const auto& b : lock_backends()) {
    BOOST_TEST_CONTEXT(b.label) {
      scratch dir;
      auto name = lock_name(b, "signal");
      auto seen = dir.file("seen");
      // CMD records the signal, then dies of it (as a program that does not catch it would).
      std::string script = "trap 'echo TERM > \"" + seen + "\"; trap - TERM; kill -TERM $$' TERM; touch '" +
                           dir.file("held") + "'; " + until_signalled;
      auto holder = start_dlock(lock_args(b, name, script));
      wait_for_file(dir.file("held"));
      holder->signal(SIGTERM);
      BOOST_CHECK_EQUAL(holder->wait(), 128 + SIGTERM);
      BOOST_CHECK_EQUAL(read_file(seen), "TERM\n");
      // Released after CMD exited: another process takes it with a single attempt.
      BOOST_CHECK_EQUAL(run_dlock(lock_args(b, name, "true", {"--timeout", "0"})), 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_signal_while_waiting_gives_up_without_running_the_command) {
  for (const auto& b : lock_backends()) {
    BOOST_TEST_CONTEXT(b.label) {
      scratch dir;
      auto name = lock_name(b, "wait-signal");
      auto holder = start_dlock(lock_args(b, name, hold_until(dir.file("held"), dir.file("release"))));
      wait_for_file(dir.file("held"));
      auto waiter = start_dlock(lock_args(b, name, "touch '" + dir.file("ran") + "'"));
      // Nothing observable says the waiter is waiting yet: the signal may come
      // before dlock listens (it dies of it), while it connects or while it
      // waits; a caller sees the same status each time, and CMD never runs.
      waiter->signal(SIGINT);
      BOOST_CHECK_EQUAL(waiter->wait(), 128 + SIGINT);
      BOOST_CHECK(!std::filesystem::exists(dir.file("ran")));
      std::ofstream(dir.file("release")).put('\n');
      BOOST_CHECK_EQUAL(holder->wait(), 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(command_sees_the_lock_in_its_environment) {
  for (const auto& b : lock_backends()) {
    BOOST_TEST_CONTEXT(b.label) {
      scratch dir;
      auto name = lock_name(b, "env");
      auto out = dir.file("env");
      std::string script = "echo \"${DLOCK_LOCK_NAME-unset}\"; echo \"${DLOCK_FENCING_TOKEN-unset}\"";
      BOOST_REQUIRE_EQUAL(run_dlock(lock_args(b, name, script), out), 0);
      auto first = read_lines(out);
      BOOST_REQUIRE_EQUAL(first.size(), 2u);
      BOOST_CHECK_EQUAL(first[0], name);
      BOOST_REQUIRE_EQUAL(run_dlock(lock_args(b, name, script), out), 0);
      auto second = read_lines(out);
      BOOST_REQUIRE_EQUAL(second.size(), 2u);
      // Fencing tokens are positive and grow from one holder to the next, on
      // every backend.
      BOOST_CHECK_GT(std::stoll(first[1]), 0);
      BOOST_CHECK_GT(std::stoll(second[1]), std::stoll(first[1]));
    }
  }
}

BOOST_AUTO_TEST_CASE(command_does_not_inherit_dlock_connections) {
  // The test itself has no sockets open, so any socket CMD sees is dlock's.
  for (const auto& b : lock_backends()) {
    BOOST_TEST_CONTEXT(b.label) {
      scratch dir;
      auto out = dir.file("sockets");
      std::string script = "for f in /proc/$$/fd/*; do readlink \"$f\"; done | grep -c '^socket:' || true";
      BOOST_REQUIRE_EQUAL(run_dlock(lock_args(b, lock_name(b, "fds"), script), out), 0);
      BOOST_CHECK_EQUAL(read_file(out), "0\n");
    }
  }
}

BOOST_AUTO_TEST_CASE(usage_errors_exit_2_with_one_line) {
  auto zk = dlock::test::zk_hosts();
  std::vector<std::vector<std::string>> bad = {
      {},
      {"frobnicate"},
      {"lock", "--zk", zk, "/p"},                                   // no CMD
      {"lock", "--zk", zk, "--", "true"},                           // no PATH
      {"lock", "/p", "--", "true"},                                 // no backend
      {"lock", "--zk", zk, "--redis", "h:1", "/p", "--", "true"},   // two backends
      {"lock", "--zk", zk, "relative", "--", "true"},
      {"lock", "--zk", zk, "/a//b", "--", "true"},                  // the library's path rule
      {"queue", "--zk", zk, "/q/", "size"},
      {"leader", "--zk", zk, "/"},
      {"lock", "--zk", zk, "/p", "--timeout", "soon", "--", "true"},
      {"lock", "--zk", zk, "/p", "--ttl", "5s", "--", "true"},      // --ttl is for Redis
      {"lock", "--redis", "nohost", "k", "--", "true"},
      {"lock", "--redis", "h:1", "k", "--shared", "--", "true"},
      {"lock", "--zk", zk, "/p", "--no-such-option", "--", "true"},
      {"elect", "--zk", zk, "/e", "--timeout", "0", "--", "true"},  // an election has no single attempt
      {"leader", "/e"},
      {"queue", "--zk", zk, "/q"},
      {"queue", "--zk", zk, "/q", "put"},
      {"queue", "--zk", zk, "/q", "peek", "extra"},
      {"queue", "--zk", zk, "/q", "size", "--timeout", "1s"},
      {"queue", "--zk", zk, "/q", "jump"},
  };
  scratch dir;
  auto errors = dir.file("stderr");
  for (const auto& args : bad) {
    std::string shown;
    for (const auto& a : args) shown += a + " ";
    BOOST_TEST_CONTEXT("dlock " << shown) {
      BOOST_CHECK_EQUAL(run_dlock(args, "/dev/null", errors), 2);
      auto lines = read_lines(errors);
      BOOST_CHECK_EQUAL(lines.size(), 1u);
      if (!lines.empty()) BOOST_CHECK(lines[0].starts_with("dlock: ") && lines[0].find("usage: dlock") != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_CASE(help_exits_0) {
  scratch dir;
  auto out = dir.file("help");
  for (std::vector<std::string> args : {std::vector<std::string>{"--help"}, {"lock", "--help"}, {"elect", "-h"},
                                         {"leader", "--help"}, {"queue", "--help"}}) {
    BOOST_TEST_CONTEXT(args.front()) {
      BOOST_CHECK_EQUAL(run_dlock(args, out), 0);
      BOOST_CHECK(read_file(out).find("Usage: dlock") != std::string::npos);
    }
  }
  BOOST_REQUIRE_EQUAL(run_dlock({"lock", "--help"}, out), 0);
  for (const char* status : {"121", "124", "125", "126", "127", "128+N"})
    BOOST_CHECK_MESSAGE(read_file(out).find(status) != std::string::npos, "lock --help does not document " << status);
}

BOOST_AUTO_TEST_CASE(backend_failure_exits_125) {
  // Nothing listens on port 1.
  BOOST_CHECK_EQUAL(run_dlock({"lock", "--redis", "127.0.0.1:1", "k", "--", "true"}), 125);
}

BOOST_AUTO_TEST_SUITE_END()
