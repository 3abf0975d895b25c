// dlock::zk::queue while the ensemble member its clients use is killed.
#include <dlock/error.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/queue.hpp>

#include "common/servers.hpp"
#include "common/zk_cutting_proxy.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>

namespace asio = boost::asio;
namespace zk = dlock::zk;
using dlock::error_code;
using namespace std::chrono_literals;

namespace {

constexpr auto with_ec = asio::as_tuple(asio::deferred);
constexpr int items = 600;
constexpr int consumers = 4;

zk::options ensemble_options() {
  zk::options o;
  o.hosts = dlock::test::zk_ensemble();
  o.session_timeout = 10s;  // long enough to survive the failover
  return o;
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(with_ec);
}

// Restarts a killed member even when a check fails.
struct restart_guard {
  std::string name;
  ~restart_guard() {
    if (!name.empty()) dlock::test::server_action("restart", name);
  }
};

struct outcome {
  std::multiset<std::string> delivered;
  std::set<std::string> uncertain;   // reported with removal_uncertain
  std::map<std::string, int> errors;  // other errors consumers saw (and retried)
  int taken = 0;                      // delivered + uncertain
  bool stop = false;
};

asio::awaitable<void> basic_consumer(zk::queue& q, std::shared_ptr<outcome> out) {
  while (!out->stop) {
    auto [ec, item] = co_await q.poll(with_ec);
    if (ec == dlock::error::removal_uncertain) {
      out->uncertain.insert(*item);
      ++out->taken;
    } else if (ec) {
      ++out->errors[ec.message()];
      co_await sleep_for(50ms);
    } else if (item) {
      out->delivered.insert(*item);
      ++out->taken;
    } else {
      co_await sleep_for(20ms);
    }
  }
}

asio::awaitable<void> claiming_consumer(zk::queue& q, std::shared_ptr<outcome> out) {
  while (!out->stop) {
    auto [ec, claimed] = co_await q.take_claimed(with_ec);
    if (ec) {
      ++out->errors[ec.message()];
      co_await sleep_for(50ms);
      continue;
    }
    for (;;) {  // an ack failing to a connection drop is retried: the claim is still ours
      auto [ack_ec] = co_await q.ack(claimed, with_ec);
      if (!ack_ec) break;
      ++out->errors["ack: " + ack_ec.message()];
      if (ack_ec == dlock::error::lost) break;  // the claim expired: the item went back
      co_await sleep_for(50ms);
    }
    out->delivered.insert(claimed.data);
    ++out->taken;
  }
}

asio::awaitable<void> run_with_failover(std::string path, bool claim_mode, std::shared_ptr<outcome> out) {
  auto ex = co_await asio::this_coro::executor;
  zk::client c(ex, ensemble_options());
  co_await c.connect();
  zk::queue q(c, path);
  for (int i = 0; i < items; ++i) co_await q.offer("item-" + std::to_string(i));

  for (int i = 0; i < consumers; ++i)
    asio::co_spawn(ex, claim_mode ? claiming_consumer(q, out) : basic_consumer(q, out), asio::detached);

  while (out->taken < items / 3) co_await sleep_for(5ms);
  restart_guard guard;
  std::string server = c.current_server();
  guard.name = dlock::test::zk_member_name(static_cast<std::uint16_t>(std::stoi(server.substr(server.rfind(':') + 1))));
  BOOST_TEST_MESSAGE("killing " << guard.name << " (" << server << ") with " << out->taken << " items taken");
  dlock::test::server_action("kill", guard.name);

  // Until the queue is empty (an uncertain removal may be counted twice,
  // so `taken` cannot tell), with a generous bound so a bug cannot hang CI.
  std::size_t left = items;
  for (int waited = 0; left > 0 && waited < 120'000; waited += 50) {
    co_await sleep_for(50ms);
    auto [size_ec, size] = co_await q.size(with_ec);
    if (!size_ec) left = size;
  }
  out->stop = true;
  co_await sleep_for(300ms);  // let the consumers see `stop`
  BOOST_TEST((c.state() != zk::session_state::lost), "the session must survive a member's death");
  BOOST_TEST(left == 0u);
  co_await c.close(with_ec);
}

void check_claim_mode(const outcome& out) {
  std::set<std::string> unique(out.delivered.begin(), out.delivered.end());
  BOOST_TEST(out.delivered.size() == unique.size(), "claim/ack mode delivered an item twice");
  BOOST_TEST(unique.size() == static_cast<std::size_t>(items), "claim/ack mode lost items");
  BOOST_TEST(out.uncertain.empty());
}

void check_basic_mode(const outcome& out) {
  std::set<std::string> unique(out.delivered.begin(), out.delivered.end());
  BOOST_TEST(out.delivered.size() == unique.size(), "basic mode delivered an item twice");
  // Every item was delivered or reported uncertain: nothing vanished silently.
  for (int i = 0; i < items; ++i) {
    std::string item = "item-" + std::to_string(i);
    BOOST_TEST((unique.count(item) || out.uncertain.count(item)), item << " vanished without a word");
  }
  BOOST_TEST_MESSAGE("basic mode: " << out.uncertain.size() << " removals reported uncertain");
}

// The basic mode's one window, on demand: the delete of a taken item reaches
// the server, the connection drops before its reply. The consumer must be told.
asio::awaitable<void> lost_removal_reply(std::string path) {
  auto ex = co_await asio::this_coro::executor;
  std::string server = dlock::test::zk_hosts();
  auto colon = server.rfind(':');
  dlock::test::zk_cutting_proxy proxy(
      {asio::ip::make_address(server.substr(0, colon)),
           static_cast<std::uint16_t>(std::stoi(server.substr(colon + 1)))});
  zk::options options;
  options.hosts = proxy.address();
  options.session_timeout = 10s;
  zk::client c(ex, options);
  co_await c.connect();
  zk::queue q(c, path);
  co_await q.offer("fragile");
  proxy.cut_after(2 /* ZooKeeper's OpCode.delete */, 300ms);
  auto [ec, item] = co_await q.poll(with_ec);
  BOOST_TEST(proxy.cuts() == 1);
  BOOST_TEST((ec == dlock::error::removal_uncertain), "got: " << ec.message());
  BOOST_TEST((item == std::optional<std::string>("fragile")), "the uncertain item's data is handed over");
  auto [size_ec, left] = co_await q.size(with_ec);
  BOOST_TEST(left == 0u, "the delete had landed");
  co_await c.remove(path, -1, with_ec);
  co_await c.close(with_ec);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_queue_fault)

BOOST_AUTO_TEST_CASE(a_lost_removal_reply_is_reported_never_silent) {
  asio::io_context io;
  asio::co_spawn(io, lost_removal_reply("/" + dlock::test::unique_name("dlock-queue-window")),
                 [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run();
}

BOOST_AUTO_TEST_CASE(claim_ack_loses_and_duplicates_nothing_when_a_member_dies) {
  auto out = std::make_shared<outcome>();
  asio::io_context io;
  asio::co_spawn(io, run_with_failover("/" + dlock::test::unique_name("dlock-queue-fault"), true, out),
                 [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run();
  for (const auto& [what, count] : out->errors) BOOST_TEST_MESSAGE(count << " x " << what);
  check_claim_mode(*out);
}

BOOST_AUTO_TEST_CASE(basic_mode_reports_every_uncertain_removal_when_a_member_dies) {
  auto out = std::make_shared<outcome>();
  asio::io_context io;
  asio::co_spawn(io, run_with_failover("/" + dlock::test::unique_name("dlock-queue-fault"), false, out),
                 [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run();
  for (const auto& [what, count] : out->errors) BOOST_TEST_MESSAGE(count << " x " << what);
  check_basic_mode(*out);
}

BOOST_AUTO_TEST_SUITE_END()
