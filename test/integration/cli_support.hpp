// Running the dlock tool from tests: start it, wait for it, read what it wrote.
// Blocking and single-threaded on purpose: the tests orchestrate processes.
#pragma once

#include "common/servers.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace cli_test {

using namespace std::chrono_literals;

/// Every wait in these tests is bounded by this: generous, never a timing assertion.
inline constexpr std::chrono::seconds patience{120};

/// A started dlock (or any program); killed and reaped if a test ends early.
class process {
 public:
  process(const std::vector<std::string>& argv, const std::string& stdout_path, const std::string& stderr_path) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!stderr_path.empty())
      posix_spawn_file_actions_addopen(&files, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    // Started as a shell starts a command, whatever this process inherited
    // (a CI runner may ignore SIGINT, and a signal sent before dlock listens
    // would then be lost, not fatal); in a process group of its own, so that
    // what it started goes with it if a test ends early.
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t signals;
    sigemptyset(&signals);
    posix_spawnattr_setsigmask(&attributes, &signals);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) sigaddset(&signals, s);
    posix_spawnattr_setsigdefault(&attributes, &signals);
    posix_spawnattr_setpgroup(&attributes, 0);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    int err = posix_spawnp(&pid_, args[0], &files, &attributes, args.data(), environ);
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&files);
    BOOST_REQUIRE_MESSAGE(err == 0, "cannot start " << argv[0] << ": " << std::strerror(err));
  }
  ~process() {
    if (status_ >= 0) return;
    ::kill(-pid_, SIGKILL);  // its children too: they would hold the test's output open
    ::kill(pid_, SIGKILL);
    int ignored = 0;
    ::waitpid(pid_, &ignored, 0);
  }
  process(const process&) = delete;
  process& operator=(const process&) = delete;

  void signal(int signo) const { ::kill(pid_, signo); }

  /// The exit status (as wait() gives it) if the process has ended; never blocks.
  std::optional<int> poll() {
    int st = 0;
    if (status_ < 0 && ::waitpid(pid_, &st, WNOHANG) == pid_)
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (status_ < 0) return std::nullopt;
    return status_;
  }

  /// The exit status as a shell reports it; fails the test after `patience`.
  int wait() {
    auto deadline = std::chrono::steady_clock::now() + patience;
    while (status_ < 0) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_)
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      else if (std::chrono::steady_clock::now() > deadline)
        BOOST_FAIL("process " << pid_ << " still running after " << patience.count() << " s");
      else
        std::this_thread::sleep_for(20ms);
    }
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
};

/// The dlock executable built with the tests, or DLOCK_CLI_UNDER_TEST's (to
/// run the CLI tests against another build, e.g. an older one).
inline std::string dlock_path() {
  const char* other = std::getenv("DLOCK_CLI_UNDER_TEST");
  return other && *other ? other : DLOCK_CLI_PATH;
}

/// A fresh folder for a test's files, removed at the end.
class scratch {
 public:
  scratch() {
    std::string pattern = (std::filesystem::temp_directory_path() / "dlock-cli-XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(pattern.data()));
    dir_ = pattern;
  }
  ~scratch() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
};

inline std::vector<std::string> with_dlock(std::vector<std::string> args) {
  args.insert(args.begin(), dlock_path());
  return args;
}

/// Starts `dlock ARGS...`; stdout goes to `stdout_path`, stderr to the test's own unless `stderr_path`.
inline std::unique_ptr<process> start_dlock(std::vector<std::string> args, const std::string& stdout_path = "/dev/null",
                                            const std::string& stderr_path = "") {
  return std::make_unique<process>(with_dlock(std::move(args)), stdout_path, stderr_path);
}

/// Runs `dlock ARGS...` to completion; returns its exit status.
inline int run_dlock(std::vector<std::string> args, const std::string& stdout_path = "/dev/null",
                     const std::string& stderr_path = "") {
  return start_dlock(std::move(args), stdout_path, stderr_path)->wait();
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// Polls `condition` until it holds; fails the test after `patience`.
inline void wait_until(const std::function<bool()>& condition, const std::string& what) {
  auto deadline = std::chrono::steady_clock::now() + patience;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) BOOST_FAIL("gave up waiting for " << what);
    std::this_thread::sleep_for(20ms);
  }
}

inline void wait_for_file(const std::string& path) {
  wait_until([&] { return std::filesystem::exists(path); }, path + " to appear");
}

/// The backends a lock test runs against, as dlock's arguments.
struct backend {
  std::string label;
  std::vector<std::string> args;  ///< --zk HOSTS or --redis ADDRESSES
  bool zk = false;
};

inline std::string redis_address(std::size_t index) {
  auto m = dlock::test::redis_masters().at(index);
  return m.host + ":" + std::to_string(m.port);
}

inline std::vector<backend> lock_backends() {
  std::string all;
  for (std::size_t i = 0; i < dlock::test::redis_masters().size(); ++i) all += (i ? "," : "") + redis_address(i);
  return {{"zookeeper", {"--zk", dlock::test::zk_hosts()}, true},
          {"redis", {"--redis", redis_address(0)}, false},
          {"redlock", {"--redis", all}, false}};
}

/// A lock name for `b`: a ZooKeeper path or a Redis key, fresh for each run.
inline std::string lock_name(const backend& b, const std::string& stem) {
  auto unique = dlock::test::unique_name("cli-" + stem);
  return b.zk ? "/dlock-test/" + unique : unique;
}

/// `dlock lock BACKEND NAME EXTRA... -- sh -c SCRIPT`
inline std::vector<std::string> lock_args(const backend& b, const std::string& name, const std::string& script,
                                          std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"lock"};
  args.insert(args.end(), b.args.begin(), b.args.end());
  args.push_back(name);
  args.insert(args.end(), extra.begin(), extra.end());
  args.insert(args.end(), {"--", "sh", "-c", script});
  return args;
}

/// A shell snippet that runs until a trapped signal ends it. Short sleeps, not
/// one long one: a long sleep could outlive the test, holding ctest's output pipe.
inline const std::string until_signalled = "while :; do sleep 0.1; done";

/// A shell snippet that marks `started`, then waits (interruptibly) until `release` exists.
inline std::string hold_until(const std::string& started, const std::string& release) {
  return "touch '" + started + "'; while [ ! -e '" + release + "' ]; do sleep 0.05; done";
}

}  // namespace cli_test
