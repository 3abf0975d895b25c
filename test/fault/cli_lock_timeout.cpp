// `dlock lock --timeout` on Redlock without a majority: three of five
// masters stopped (SIGSTOP), the acquire times out (status 124), and what its
// attempts set on the two live masters must be gone when dlock has exited.
// The acquire deletes its last attempt's keys in the background when the
// timeout cancels it; dlock must not close its connections (and exit) before
// those deletes are sent and answered.
#include "integration/cli_support.hpp"

#include <dlock/redis/connection.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/test/unit_test.hpp>

#include <exception>
#include <optional>

using namespace cli_test;
namespace asio = boost::asio;
namespace redis = dlock::redis;

namespace {

// Resumes the paused servers whatever the test does (see cli_lock_loss.cpp).
struct resume_guard {
  std::vector<std::string> names;
  explicit resume_guard(std::vector<std::string> paused) : names(std::move(paused)) {}
  ~resume_guard() {
    for (const auto& name : names) dlock::test::server_action("resume", name);
  }
  resume_guard(const resume_guard&) = delete;
  resume_guard& operator=(const resume_guard&) = delete;
};

// EXISTS key on master `index`: "1", "0", or what went wrong.
asio::awaitable<std::string> exists_on(std::size_t index, std::string key) {
  auto master = dlock::test::redis_masters().at(index);
  redis::options o;
  o.host = master.host;
  o.port = master.port;
  o.reconnect = false;
  redis::connection c(co_await asio::this_coro::executor, o);
  constexpr auto with_error = asio::as_tuple(asio::deferred);
  auto [connect_ec] = co_await c.connect(with_error);
  if (connect_ec) co_return "connect: " + connect_ec.message();
  auto [ec, reply] = co_await c.exec(redis::command("EXISTS", key), with_error);
  c.close();
  if (ec) co_return "error: " + ec.message();
  co_return std::to_string(reply.integer());
}

std::string exists(std::size_t index, const std::string& key) {
  asio::io_context io;
  std::optional<std::string> out;
  std::exception_ptr failed;
  asio::co_spawn(io, exists_on(index, key), [&](std::exception_ptr e, std::string value) {
    failed = e;
    out = std::move(value);
  });
  io.run();
  if (failed) std::rethrow_exception(failed);
  return *out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_lock_timeout)

// The timeout may cut any phase of Redlock's retry cycle (an attempt in
// flight, its cleanup, the pause before the next): the timeouts are spread
// over more than one cycle (master_timeout 50 ms, cleanup, retry_delay
// 200 +/- 100 ms), so that some of them cut an attempt whose SETs landed on
// the live masters. Before the fix about one run in six left the keys.
BOOST_AUTO_TEST_CASE(a_timed_out_redlock_acquire_leaves_no_key_on_the_live_masters) {
  auto masters = dlock::test::redis_masters();
  BOOST_REQUIRE_EQUAL(masters.size(), 5u);
  std::string all;
  for (std::size_t i = 0; i < masters.size(); ++i) all += (i ? "," : "") + redis_address(i);
  std::vector<std::string> paused;
  for (std::size_t i = 2; i < 5; ++i) paused.push_back(dlock::test::redis_name(i));  // 3 of 5: no majority
  resume_guard guard(paused);
  for (const auto& name : paused) dlock::test::server_action("pause", name);

  constexpr int runs = 24;
  int left = 0;
  for (int run = 0; run < runs; ++run) {
    auto key = dlock::test::unique_name("cli-timeout-cleanup");
    auto timeout = std::to_string(1000 + 13 * run) + "ms";
    int status = run_dlock({"lock", "--redis", all, "--timeout", timeout, key, "--", "true"}, "/dev/null", "/dev/null");
    BOOST_TEST_CONTEXT("run " << run << ", --timeout " << timeout) {
      BOOST_CHECK_EQUAL(status, 124);
      for (std::size_t live = 0; live < 2; ++live) {
        auto found = exists(live, key);
        BOOST_CHECK_MESSAGE(found == "0", "the key on live master " << live << ": " << found);
        if (found != "0") ++left;
      }
    }
  }
  BOOST_TEST_MESSAGE(left << " keys left over " << runs << " runs");
}

BOOST_AUTO_TEST_SUITE_END()
