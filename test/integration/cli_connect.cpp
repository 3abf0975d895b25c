// dlock against servers that never answer: --timeout bounds the whole wait,
// connecting included, on every backend, and --connect-timeout bounds
// connecting. Only outcomes are checked (the exit status, and that dlock did
// not sit out a connect timeout far longer than its --timeout).
#include "integration/cli_support.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

using namespace cli_test;

namespace {

/// A TCP port where connecting never completes: a listener whose accept
/// queue (backlog 0) is filled by our own connections and never drained, so
/// the kernel drops every later SYN and the client's connect hangs, as it
/// does towards a host that is down or partitioned away.
class unresponsive_server {
 public:
  unresponsive_server() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    BOOST_REQUIRE(listener_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    BOOST_REQUIRE(::listen(listener_, 0) == 0);
    socklen_t length = sizeof address;
    BOOST_REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port_ = ntohs(address.sin_port);
    // One connection fills a backlog-0 queue (Linux admits backlog + 1).
    filler_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    BOOST_REQUIRE(filler_ >= 0);
    ::connect(filler_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    pollfd connected{filler_, POLLOUT, 0};
    BOOST_REQUIRE(::poll(&connected, 1, 5000) == 1);
  }
  ~unresponsive_server() {
    ::close(filler_);
    ::close(listener_);
  }
  unresponsive_server(const unresponsive_server&) = delete;
  unresponsive_server& operator=(const unresponsive_server&) = delete;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int listener_ = -1;
  int filler_ = -1;
  int port_ = 0;
};

using steady = std::chrono::steady_clock;

/// Runs dlock; returns its status and how long it took.
std::pair<int, steady::duration> timed_run(std::vector<std::string> args, const std::string& errors = "") {
  auto start = steady::now();
  int status = run_dlock(std::move(args), "/dev/null", errors);
  return {status, steady::now() - start};
}

std::string joined(const std::vector<std::unique_ptr<unresponsive_server>>& servers) {
  std::string out;
  for (const auto& s : servers) out += (out.empty() ? "" : ",") + s->address();
  return out;
}

/// Backends whose every server never answers.
struct silent_backends {
  unresponsive_server zk, redis;
  std::vector<std::unique_ptr<unresponsive_server>> masters;
  silent_backends() {
    for (int i = 0; i < 3; ++i) masters.push_back(std::make_unique<unresponsive_server>());
  }
  std::vector<backend> all() const {
    return {{"zookeeper", {"--zk", zk.address()}, true},
            {"redis", {"--redis", redis.address()}, false},
            {"redlock", {"--redis", joined(masters)}, false}};
  }
};

// Far longer than any --timeout below: a dlock that waited for it would be caught.
constexpr auto long_connect = 30s;

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_connect)

BOOST_AUTO_TEST_CASE(timeout_bounds_connecting_on_every_backend) {
  silent_backends servers;
  for (const auto& b : servers.all()) {
    BOOST_TEST_CONTEXT(b.label) {
      scratch dir;
      auto name = lock_name(b, "connect");
      auto [status, took] = timed_run(lock_args(b, name, "touch '" + dir.file("ran") + "'",
                                                {"--timeout", "2s", "--connect-timeout", "30s"}),
                                      dir.file("stderr"));
      BOOST_CHECK_EQUAL(status, 124);
      BOOST_CHECK_MESSAGE(took < long_connect, "dlock waited for the connect timeout");
      BOOST_CHECK(!std::filesystem::exists(dir.file("ran")));
      auto message = read_lines(dir.file("stderr"));
      BOOST_CHECK_EQUAL(message.size(), 1u);  // one line, naming the lock
      if (!message.empty()) BOOST_CHECK(message[0].find(name) != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_CASE(timeout_bounds_connecting_with_the_default_connect_timeout) {
  // The case: ZooKeeper's default connect timeout (15 s) used to
  // outlast --timeout 2s, and dlock then failed with 125.
  silent_backends servers;
  auto b = servers.all()[0];
  auto [status, took] = timed_run(lock_args(b, lock_name(b, "connect"), "true", {"--timeout", "2s"}));
  BOOST_CHECK_EQUAL(status, 124);
  BOOST_CHECK_MESSAGE(took < 15s, "dlock waited for the connect timeout");
}

BOOST_AUTO_TEST_CASE(connect_timeout_ends_connecting_with_125) {
  silent_backends servers;
  for (const auto& b : servers.all()) {
    BOOST_TEST_CONTEXT(b.label) {
      scratch dir;
      auto [status, took] = timed_run(lock_args(b, lock_name(b, "connect"), "touch '" + dir.file("ran") + "'",
                                                {"--connect-timeout", "1s"}),
                                      dir.file("stderr"));
      BOOST_CHECK_EQUAL(status, 125);
      BOOST_CHECK(!std::filesystem::exists(dir.file("ran")));
      auto errors = read_file(dir.file("stderr"));
      BOOST_CHECK_MESSAGE(errors.find("cannot connect") != std::string::npos, errors);
    }
  }
}

BOOST_AUTO_TEST_CASE(elect_and_queue_take_count_connecting_against_their_timeout) {
  unresponsive_server zk;
  auto path = "/dlock-test/" + dlock::test::unique_name("cli-connect");
  auto [elect_status, elect_took] = timed_run({"elect", "--zk", zk.address(), path, "--timeout", "2s",
                                               "--connect-timeout", "30s", "--", "true"});
  BOOST_CHECK_EQUAL(elect_status, 124);
  BOOST_CHECK(elect_took < long_connect);
  auto [take_status, take_took] = timed_run({"queue", "--zk", zk.address(), path, "take", "--timeout", "2s",
                                             "--connect-timeout", "30s"});
  BOOST_CHECK_EQUAL(take_status, 124);
  BOOST_CHECK(take_took < long_connect);
}

BOOST_AUTO_TEST_CASE(every_zookeeper_subcommand_takes_a_connect_timeout) {
  unresponsive_server zk;
  auto path = "/dlock-test/" + dlock::test::unique_name("cli-connect");
  const std::vector<std::string> limit{"--connect-timeout", "1s"};
  auto with_limit = [&](std::vector<std::string> args) {
    args.insert(std::find(args.begin(), args.end(), "--"), limit.begin(), limit.end());
    return args;
  };
  for (const auto& args : {with_limit({"leader", "--zk", zk.address(), path}),
                           with_limit({"queue", "--zk", zk.address(), path, "size"}),
                           with_limit({"queue", "--zk", zk.address(), path, "put", "x"}),
                           with_limit({"elect", "--zk", zk.address(), path, "--", "true"})}) {
    BOOST_TEST_CONTEXT(args.front() << " " << args.at(4)) { BOOST_CHECK_EQUAL(run_dlock(args), 125); }
  }
}

BOOST_AUTO_TEST_CASE(a_signal_while_connecting_ends_the_wait) {
  silent_backends servers;
  for (const auto& b : servers.all()) {
    BOOST_TEST_CONTEXT(b.label) {
      scratch dir;
      auto start = steady::now();
      auto waiter = start_dlock(lock_args(b, lock_name(b, "connect"), "touch '" + dir.file("ran") + "'",
                                          {"--connect-timeout", "60s"}));
      std::this_thread::sleep_for(300ms);  // most likely connecting by now; the status is the same either way
      waiter->signal(SIGINT);
      BOOST_CHECK_EQUAL(waiter->wait(), 128 + SIGINT);
      BOOST_CHECK(steady::now() - start < 60s);
      BOOST_CHECK(!std::filesystem::exists(dir.file("ran")));
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_connect_timeouts_are_usage_errors) {
  auto zk = dlock::test::zk_hosts();
  for (const char* bad : {"0", "soon", "-1s"}) {
    BOOST_TEST_CONTEXT(bad) {
      BOOST_CHECK_EQUAL(run_dlock({"lock", "--zk", zk, "/p", "--connect-timeout", bad, "--", "true"}), 2);
      BOOST_CHECK_EQUAL(run_dlock({"lock", "--redis", "127.0.0.1:1", "k", "--connect-timeout", bad, "--", "true"}), 2);
      BOOST_CHECK_EQUAL(run_dlock({"queue", "--zk", zk, "/q", "size", "--connect-timeout", bad}), 2);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
