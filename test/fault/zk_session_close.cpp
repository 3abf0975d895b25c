// Closing a session whose server stalls right after answering close()'s probe
// (safety review F12d). The C client's zookeeper_close then blocks (up to
// 3 s + 1.5 s) waiting for the server, and every call into the C client, from
// every session of the process, waits on the same process-wide mutex. The
// property checked is progress: another session, on another thread, keeps
// completing requests while the close waits for the stalled server.
#include "common/servers.hpp"
#include "common/zk_cutting_proxy.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/zk/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace dlock;
using namespace std::chrono_literals;
using dlock::test::run_coroutine;
using dlock::test::sleep_for;
using clock_type = std::chrono::steady_clock;
namespace opcode = dlock::test::zk_opcode;
constexpr auto tuple = asio::as_tuple(asio::deferred);

namespace {

/// Resumes the paused member whatever the test does.
struct resume_guard {
  std::string name;
  ~resume_guard() {
    try {
      if (!name.empty()) dlock::test::server_action("resume", name);
    } catch (...) {
    }
  }
};

// What the other session did, written on its thread, read once it stopped.
struct progress_log {
  struct op {
    bool started_after_close_sent = false;
    clock_type::time_point completed;
    error_code ec;
  };
  std::mutex mutex;
  std::vector<op> ops;
  std::atomic<bool> stop{false};
};

asio::awaitable<void> keep_busy(zk::client& c, const dlock::test::zk_cutting_proxy& proxy,
                                std::shared_ptr<progress_log> log) {
  while (!log->stop) {
    progress_log::op op;
    op.started_after_close_sent = proxy.forwarded(opcode::close_session) > 0;
    auto [ec, st] = co_await c.exists("/", tuple);
    op.ec = ec;
    op.completed = clock_type::now();
    std::lock_guard lock(log->mutex);
    log->ops.push_back(op);
  }
}

std::string first_member() {
  auto ensemble = dlock::test::zk_ensemble();
  return ensemble.substr(0, ensemble.find(','));
}

std::uint16_t port_of(const std::string& server) {
  return static_cast<std::uint16_t>(std::stoi(server.substr(server.rfind(':') + 1)));
}

asio::awaitable<void> close_while_the_server_stalls(dlock::test::zk_cutting_proxy& proxy, std::string member,
                                                    std::shared_ptr<std::optional<clock_type::time_point>> closed_at) {
  auto ex = co_await asio::this_coro::executor;
  zk::client c(ex, dlock::test::zk_options(proxy.address(), 10s));
  co_await c.connect();

  // Hold the probe's reply, stop the server meanwhile: it answered the probe
  // and will read nothing after it. Stopped before it answered, the server
  // would leave the probe unanswered and close() would rightly send no CLOSE.
  proxy.hold_replies(opcode::exists, 600ms);
  auto held = proxy.held_replies();
  asio::co_spawn(ex, c.close(asio::use_awaitable), [closed_at](std::exception_ptr) { *closed_at = clock_type::now(); });
  while (proxy.held_replies() == held && !*closed_at) co_await sleep_for(1ms);
  BOOST_TEST_REQUIRE(!*closed_at, "close() completed before the server answered its probe");
  resume_guard paused{member};
  dlock::test::server_action("pause", member);
  while (!*closed_at) co_await sleep_for(5ms);
  BOOST_TEST(proxy.forwarded(opcode::close_session) == 1, "the CLOSE went to the stalled server");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_session_close)

BOOST_AUTO_TEST_CASE(another_session_keeps_working_while_a_close_waits_for_a_stalled_server) {
  auto member_address = first_member();
  auto member = dlock::test::zk_member_name(port_of(member_address));
  dlock::test::zk_cutting_proxy proxy(member_address);

  // The other session: another server, its own thread.
  asio::io_context other_io;
  auto work = asio::make_work_guard(other_io);
  std::thread other_thread([&] { other_io.run(); });
  zk::client other(other_io.get_executor(), dlock::test::zk_options(dlock::test::zk_hosts()));
  std::promise<error_code> connected;
  other.connect([&](error_code ec) { connected.set_value(ec); });
  BOOST_REQUIRE(!connected.get_future().get());
  auto log = std::make_shared<progress_log>();
  auto busy = asio::co_spawn(other_io, keep_busy(other, proxy, log), asio::use_future);

  asio::io_context io;
  auto closed_at = std::make_shared<std::optional<clock_type::time_point>>();
  run_coroutine(io, close_while_the_server_stalls(proxy, member, closed_at));

  log->stop = true;
  busy.get();
  std::promise<error_code> closed;
  other.close([&](error_code ec) { closed.set_value(ec); });
  closed.get_future().get();
  work.reset();
  other_thread.join();

  BOOST_REQUIRE(closed_at->has_value());
  int during_the_close = 0, failed = 0;
  for (auto& op : log->ops) {
    if (op.ec) ++failed;
    if (op.started_after_close_sent && op.completed < **closed_at) ++during_the_close;
  }
  BOOST_TEST_MESSAGE("the other session completed " << log->ops.size() << " requests, " << during_the_close
                                                    << " of them begun after the CLOSE went out and done before "
                                                       "close() completed");
  BOOST_TEST(failed == 0);
  BOOST_TEST(during_the_close >= 3, "the other session stalled while the close waited for the stalled server");
}

BOOST_AUTO_TEST_SUITE_END()
