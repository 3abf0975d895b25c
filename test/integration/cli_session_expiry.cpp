// `dlock lock` and `dlock elect` on ZooKeeper whose session expires while
// they wait (a partition longer than the session timeout, made by a proxy
// that forwards nothing): they queue again on the new session and still get
// the lock within --timeout, instead of failing; and nothing about the
// expired session's node is reported as an error.
#include "integration/cli_support.hpp"

#include "common/zk_cutting_proxy.hpp"

#include <dlock/zk/client.hpp>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/test/unit_test.hpp>

#include <future>

using namespace cli_test;
namespace asio = boost::asio;
namespace zk = dlock::zk;

namespace {

/// A ZooKeeper session of the test's own, on a thread of its own, that counts a node's children.
class zk_observer {
 public:
  zk_observer() : work_(io_.get_executor()), client_(io_.get_executor(), options()) {
    thread_ = std::thread([this] { io_.run(); });
    std::promise<boost::system::error_code> connected;
    asio::post(io_, [&] { client_.connect([&](boost::system::error_code ec) { connected.set_value(ec); }); });
    auto ec = connected.get_future().get();
    BOOST_REQUIRE_MESSAGE(!ec, "observer: " << ec.message());
  }
  ~zk_observer() {
    std::promise<void> closed;
    asio::post(io_, [&] { client_.close([&](boost::system::error_code) { closed.set_value(); }); });
    closed.get_future().wait();
    io_.stop();  // whatever the closed client still has pending is of no interest
    thread_.join();
  }
  zk_observer(const zk_observer&) = delete;
  zk_observer& operator=(const zk_observer&) = delete;

  std::size_t children(const std::string& path) {
    std::promise<std::size_t> count;
    asio::post(io_, [&] {
      client_.get_children(path, [&](boost::system::error_code ec, std::vector<std::string> names, zk::stat) {
        count.set_value(ec ? 0 : names.size());
      });
    });
    return count.get_future().get();
  }

 private:
  static zk::options options() {
    zk::options o;
    o.hosts = dlock::test::zk_hosts();
    return o;
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  zk::client client_;
  std::thread thread_;
};

/// Waits until `path` has `n` children, failing at once if `waiter` exits first.
void wait_for_children(zk_observer& observer, const std::string& path, std::size_t n, process& waiter,
                       const std::string& what, const std::string& errors) {
  wait_until([&] {
    if (auto status = waiter.poll())
      BOOST_FAIL("dlock exited with " << *status << " while waiting for " << what << "; it said: " << read_file(errors));
    return observer.children(path) == n;
  }, what);
}

/// The lines of `path` that report an error.
std::vector<std::string> error_lines(const std::string& path) {
  std::vector<std::string> out;
  for (auto& line : read_lines(path))
    if (line.find("error:") != std::string::npos) out.push_back(line);
  return out;
}

// `dlock SUBCOMMAND` waits behind a holder through a proxy, which then cuts
// it off until the servers expire its session; the waiter must still run CMD
// once the holder leaves.
void survive_an_expiry(const std::string& subcommand, std::vector<std::string> extra) {
  scratch dir;
  zk_observer observer;
  auto hosts = dlock::test::zk_hosts();
  auto path = "/dlock-test/" + dlock::test::unique_name("cli-expiry");
  std::vector<std::string> holder_args{subcommand, "--zk", hosts, path};
  holder_args.insert(holder_args.end(), extra.begin(), extra.end());
  holder_args.insert(holder_args.end(), {"--", "sh", "-c", hold_until(dir.file("held"), dir.file("release"))});
  auto holder = start_dlock(holder_args);
  wait_for_file(dir.file("held"));

  dlock::test::zk_cutting_proxy proxy(hosts);
  std::vector<std::string> waiter_args{subcommand, "--zk", proxy.address(), path, "--session-timeout", "2s",
                                       "--timeout", "100s"};
  waiter_args.insert(waiter_args.end(), extra.begin(), extra.end());
  waiter_args.insert(waiter_args.end(), {"--", "touch", dir.file("ran")});
  auto errors = dir.file("stderr");
  auto waiter = start_dlock(waiter_args, "/dev/null", errors);
  wait_for_children(observer, path, 2, *waiter, "the waiter to queue", errors);

  proxy.black_hole(true);  // the servers hear nothing from the waiter: they expire its session, and its node
  wait_for_children(observer, path, 1, *waiter, "the waiter's session to expire", errors);
  proxy.black_hole(false);
  proxy.cut_all();  // the waiter reconnects, learns of the expiry, opens a new session
  wait_for_children(observer, path, 2, *waiter, "the waiter to queue again", errors);

  std::ofstream(dir.file("release")).put('\n');
  BOOST_CHECK_EQUAL(holder->wait(), 0);
  BOOST_CHECK_EQUAL(waiter->wait(), 0);
  BOOST_CHECK(std::filesystem::exists(dir.file("ran")));
  auto reported = error_lines(errors);
  BOOST_CHECK_MESSAGE(reported.empty(), "dlock reported: " << (reported.empty() ? "" : reported.front()));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_session_expiry)

BOOST_AUTO_TEST_CASE(lock_waits_on_across_an_expiry) { survive_an_expiry("lock", {}); }

BOOST_AUTO_TEST_CASE(elect_waits_on_across_an_expiry) { survive_an_expiry("elect", {}); }

BOOST_AUTO_TEST_SUITE_END()
