// dlock::zk::queue while the ensemble member its clients use is killed.
#include <dlock/error.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/queue.hpp>

#include "common/run.hpp"
#include "common/servers.hpp"
#include "common/zk.hpp"
#include "common/zk_cutting_proxy.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>

namespace asio = boost::asio;
namespace zk = dlock::zk;
using dlock::error_code;
using namespace std::chrono_literals;
using dlock::test::sleep_for;
using dlock::test::delete_tree;
using dlock::test::with_ec;

namespace {

constexpr int items = 600;
constexpr int consumers = 4;

zk::options ensemble_options() {
  zk::options o;
  o.hosts = dlock::test::zk_ensemble();
  o.session_timeout = 10s;  // long enough to survive the failover
  return o;
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
  std::set<std::string> offer_failed;  // setup offers that failed (see run_with_failover)
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
    error_code ack_ec;
    for (;;) {  // an ack failing to a connection drop is retried: the claim is still ours
      std::tie(ack_ec) = co_await q.ack(claimed, with_ec);
      if (!ack_ec) break;
      ++out->errors["ack: " + ack_ec.message()];
      if (ack_ec == dlock::error::lost) break;  // the claim expired: the item went back
      if (ack_ec == dlock::error::removal_uncertain) break;  // the session ended mid-ack
      co_await sleep_for(50ms);
    }
    if (ack_ec == dlock::error::removal_uncertain) out->uncertain.insert(claimed.data);
    out->delivered.insert(claimed.data);
    ++out->taken;
  }
}

// The fault this test injects is its own member kill: start on an ensemble
// that has been serving without a break for a while (an earlier fault test
// may have restarted every member, and a new quorum can still re-elect in
// its first seconds). Offers are never retried (a retry could duplicate an
// item), so an election during them would fail the test for the wrong reason.
asio::awaitable<void> wait_for_a_steady_ensemble(zk::client& c, std::string probe) {
  int steady = 0;
  for (int i = 0; i < 300 && steady < 15; ++i) {  // 15 probes in a row, 200 ms apart: 3 s; at most 60 s
    auto [create_ec, made] = co_await c.create(probe, "", zk::create_mode::ephemeral, with_ec);
    auto [remove_ec] = co_await c.remove(probe, -1, with_ec);
    steady = (!create_ec && !remove_ec) ? steady + 1 : 0;
    co_await sleep_for(200ms);
  }
  BOOST_TEST_MESSAGE("ensemble steady: " << (steady >= 15 ? "yes" : "no"));
}

asio::awaitable<void> run_with_failover(std::string path, bool claim_mode, std::shared_ptr<outcome> out) {
  auto ex = co_await asio::this_coro::executor;
  zk::client c(ex, ensemble_options());
  co_await c.connect();
  co_await wait_for_a_steady_ensemble(c, path + "-probe");
  zk::queue q(c, path);
  // Setup, not the subject. On a loaded machine an ensemble member can stall
  // past the client's timeout here (CI saw ZOPERATIONTIMEOUT on an offer).
  // A failed offer is not retried (it may have landed: a second copy would
  // read as a delivery twice); its item may then be missing, and only that.
  for (int i = 0; i < items; ++i) {
    auto item = "item-" + std::to_string(i);
    auto [offer_ec, made] = co_await q.offer(item, with_ec);
    if (offer_ec) out->offer_failed.insert(item);
  }
  if (!out->offer_failed.empty())
    BOOST_TEST_MESSAGE(out->offer_failed.size() << " setup offers failed; their items may be missing");
  BOOST_TEST_REQUIRE(out->offer_failed.size() <= static_cast<std::size_t>(items / 10),
                     "the ensemble did not serve the setup's offers");

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
  for (int i = 0; i < items; ++i) {
    std::string item = "item-" + std::to_string(i);
    BOOST_TEST((unique.count(item) || out.offer_failed.count(item)), "claim/ack mode lost " << item);
  }
  BOOST_TEST(out.uncertain.empty());
}

void check_basic_mode(const outcome& out) {
  std::set<std::string> unique(out.delivered.begin(), out.delivered.end());
  BOOST_TEST(out.delivered.size() == unique.size(), "basic mode delivered an item twice");
  // Every item was delivered or reported uncertain: nothing vanished silently.
  for (int i = 0; i < items; ++i) {
    std::string item = "item-" + std::to_string(i);
    BOOST_TEST((unique.count(item) || out.uncertain.count(item) || out.offer_failed.count(item)),
               item << " vanished without a word");
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

// ---- helpers for the proxy cases ----

zk::options through(const dlock::test::zk_cutting_proxy& proxy, std::chrono::milliseconds session_timeout) {
  zk::options o;
  o.hosts = proxy.address();
  o.session_timeout = session_timeout;
  return o;
}

zk::options direct() {
  zk::options o;
  o.hosts = dlock::test::zk_hosts();
  o.session_timeout = 10s;
  return o;
}

// Waits (bounded, never a timing assertion) until `condition` holds.
asio::awaitable<bool> eventually(std::function<bool()> condition, std::chrono::milliseconds bound = 30s) {
  for (auto waited = 0ms; waited < bound; waited += 10ms) {
    if (condition()) co_return true;
    co_await sleep_for(10ms);
  }
  co_return condition();
}

// Ends the session `id` from another connection (it closes it), as the
// servers do when a session expires; its ephemeral nodes go at once.
asio::awaitable<void> end_session(std::int64_t id, std::string password) {
  zk::options same = direct();
  same.session_id = id;
  same.session_password = std::move(password);
  same.reopen_on_expiry = false;
  zk::client twin(co_await asio::this_coro::executor, same);
  co_await twin.connect();
  co_await twin.close();
}

template <class... T>
struct outcome_of {
  std::optional<std::tuple<error_code, T...>> value;
};

template <class Result, class Operation>
asio::awaitable<void> record(Operation operation, std::shared_ptr<Result> into) {
  into->value = co_await std::move(operation);
}

// ---- F6: a deadline during the removal delivers the item ----

asio::awaitable<void> deadline_during_removal(std::string path) {
  auto ex = co_await asio::this_coro::executor;
  dlock::test::zk_cutting_proxy proxy(dlock::test::zk_hosts());
  zk::client c(ex, through(proxy, 10s));
  co_await c.connect();
  zk::queue q(c, path);
  auto [empty_ec, none] = co_await q.take_for(200ms, with_ec);
  BOOST_TEST((empty_ec == dlock::error::timed_out), "an empty queue: " << empty_ec.message());
  co_await q.offer("slow");
  proxy.hold_replies(dlock::test::zk_opcode::remove, 1500ms);  // the removal outlives the deadline
  auto [ec, item] = co_await q.take_for(300ms, with_ec);
  BOOST_TEST(proxy.cuts() == 1);
  BOOST_TEST(!ec, "take_for: " << ec.message());
  BOOST_TEST(item == "slow");
  BOOST_TEST(co_await q.size() == 0u);
  co_await c.remove(path, -1, with_ec);
  co_await c.close(with_ec);
}

// ---- S2: an uncertain delete followed by no_node is never a silent skip ----

// The item's delete is lost (never applied) with the connection; the "still
// there?" look says yes, but the node is gone by the retry (a late delete of
// ours or another consumer's: the client cannot tell). The item must come
// back as removal_uncertain, not vanish.
asio::awaitable<void> stale_still_there(std::string path) {
  auto ex = co_await asio::this_coro::executor;
  dlock::test::zk_cutting_proxy proxy(dlock::test::zk_hosts());
  zk::client c(ex, through(proxy, 10s)), other(ex, direct());
  co_await c.connect();
  co_await other.connect();
  zk::queue q(c, path);
  std::string name = co_await q.offer("x");
  proxy.cut_before(dlock::test::zk_opcode::remove);
  proxy.hold_replies(dlock::test::zk_opcode::exists, 1000ms);
  auto polled = std::make_shared<outcome_of<std::optional<std::string>>>();
  asio::co_spawn(ex, record(q.poll(with_ec), polled), asio::detached);
  BOOST_REQUIRE(co_await eventually([&] { return proxy.cuts() == 2; }));  // the look was answered, and is held
  co_await other.remove(path + "/" + name);
  BOOST_REQUIRE(co_await eventually([&] { return polled->value.has_value(); }));
  auto [ec, item] = *polled->value;
  BOOST_TEST((ec == dlock::error::removal_uncertain), "got: " << ec.message() << (item ? " with an item" : ""));
  BOOST_TEST((item == std::optional<std::string>("x")));
  co_await delete_tree(other, path);
  co_await c.close(with_ec);
  co_await other.close();
}

// ---- F5: a claim whose create's outcome stayed unknown is not left behind ----

asio::awaitable<void> unknown_claim_create(std::string path) {
  auto ex = co_await asio::this_coro::executor;
  dlock::test::zk_cutting_proxy proxy(dlock::test::zk_hosts());
  zk::client c(ex, through(proxy, 20s)), other(ex, direct());
  co_await c.connect();
  co_await other.connect();
  zk::queue qc(c, path), qo(other, path);
  co_await qo.offer("x");
  co_await other.create(path + ".claims", "");  // so the claim is the only create through the proxy
  // The claim's create is applied, its reply lost, and the servers stay out
  // of reach for longer than the retries last (but shorter than the session).
  proxy.cut_after(dlock::test::zk_opcode::create2, 50ms);
  proxy.refuse_for(8s);
  asio::cancellation_signal stop;
  auto claimed = std::make_shared<outcome_of<zk::claimed_item>>();
  asio::co_spawn(ex, record(qc.take_claimed(asio::bind_cancellation_slot(stop.slot(), asio::as_tuple(asio::use_awaitable))), claimed),
                 asio::detached);
  BOOST_REQUIRE(co_await eventually([&] { return proxy.cuts() == 1; }));
  // Past the refusal, and some more for the client to come back.
  co_await eventually([&] { return claimed->value.has_value(); }, 12s);
  if (!claimed->value) {
    stop.emit(asio::cancellation_type::terminal);
    BOOST_REQUIRE(co_await eventually([&] { return claimed->value.has_value(); }));
  }
  auto [ec, item] = *claimed->value;
  BOOST_TEST_MESSAGE("take_claimed: " << (ec ? ec.message() : "claimed '" + item.data + "'"));
  if (!ec) {
    BOOST_TEST(item.data == "x");  // the claim was found and adopted: ours to ack
    co_await qc.ack(item);
  } else {
    // Not handed out, so not kept: the claim goes while the session lives.
    std::size_t claims_left = 1;
    for (int i = 0; i < 1000 && claims_left > 0; ++i) {
      auto [list_ec, claims, st] = co_await other.get_children(path + ".claims", with_ec);
      if (!list_ec) claims_left = claims.size();
      if (claims_left > 0) co_await sleep_for(20ms);
    }
    BOOST_TEST(claims_left == 0u, "a claim nobody knows of stayed behind");
    BOOST_TEST((c.state() != zk::session_state::lost), "the session lived throughout");
    auto [o_ec, o_item] = co_await qo.take_claimed(with_ec);
    BOOST_TEST(o_item.data == "x");
    co_await qo.ack(o_item);
  }
  co_await delete_tree(other, path);
  co_await delete_tree(other, path + ".claims");
  co_await c.close(with_ec);
  co_await other.close();
}

// ---- F8: an ack retried across the end of its session deletes nothing ----

asio::awaitable<void> ack_across_expiry(std::string path) {
  auto ex = co_await asio::this_coro::executor;
  dlock::test::zk_cutting_proxy proxy(dlock::test::zk_hosts());
  zk::client a(ex, through(proxy, 10s)), b(ex, direct());
  co_await a.connect();
  co_await b.connect();
  zk::queue qa(a, path), qb(b, path);
  co_await qa.offer("job");
  zk::claimed_item stale = co_await qa.take_claimed();
  // A's ack: its item delete is lost unsent, and A stays cut off while its
  // session ends and B claims the item.
  proxy.cut_before(dlock::test::zk_opcode::remove);
  proxy.refuse_for(1500ms);
  auto acked = std::make_shared<outcome_of<>>();
  auto id = a.session_id();
  auto password = a.session_password();
  asio::co_spawn(ex, record(qa.ack(stale, with_ec), acked), asio::detached);
  BOOST_REQUIRE(co_await eventually([&] { return proxy.cuts() == 1; }));
  co_await end_session(id, password);
  zk::claimed_item current = co_await qb.take_claimed();
  BOOST_TEST(current.name == stale.name);
  BOOST_REQUIRE(co_await eventually([&] { return acked->value.has_value(); }));
  auto [ack_ec] = *acked->value;
  BOOST_TEST(ack_ec, "A's ack must not succeed: its claim ended with its session");
  BOOST_TEST_MESSAGE("A's ack: " << ack_ec.message());
  auto [item_ec, item] = co_await b.exists(path + "/" + current.name, with_ec);
  BOOST_TEST(item.has_value(), "A's ack deleted the item B is processing");
  auto [claim_ec, claim] = co_await b.exists(path + ".claims/" + current.name, with_ec);
  BOOST_TEST((claim && claim->ephemeral_owner == b.session_id()), "A's ack deleted B's claim");
  auto [b_ack] = co_await qb.ack(current, with_ec);
  BOOST_TEST(!b_ack, "B's ack: " << b_ack.message());
  co_await delete_tree(b, path);
  co_await delete_tree(b, path + ".claims");
  co_await a.close(with_ec);
  co_await b.close();
}

// ---- soak finding: an ack whose delete landed, its reply lost to the end of its session ----

// A's ack deletes the item; the server applies it, the reply is lost with
// the connection, and A stays cut off while its session ends. A cannot know
// whether its delete landed (it did): the ack must say so, never `lost`
// ("the item went back to the queue": here nobody would take it again).
// Cut off for longer than the retries' budget (about 3 s), the ack must not
// give up with a connection loss either: acking again would find the claim
// gone with the session and say `lost`.
asio::awaitable<void> ack_applied_then_expired(std::string path, std::chrono::milliseconds cut_off) {
  auto ex = co_await asio::this_coro::executor;
  dlock::test::zk_cutting_proxy proxy(dlock::test::zk_hosts());
  zk::client a(ex, through(proxy, 10s)), b(ex, direct());
  co_await a.connect();
  co_await b.connect();
  zk::queue qa(a, path), qb(b, path);
  co_await qa.offer("job");
  zk::claimed_item claimed = co_await qa.take_claimed();
  proxy.cut_after(dlock::test::zk_opcode::remove, 50ms);
  proxy.refuse_for(cut_off);
  auto acked = std::make_shared<outcome_of<>>();
  auto id = a.session_id();
  auto password = a.session_password();
  asio::co_spawn(ex, record(qa.ack(claimed, with_ec), acked), asio::detached);
  BOOST_REQUIRE(co_await eventually([&] { return proxy.cuts() == 1; }));
  co_await end_session(id, password);
  BOOST_REQUIRE(co_await eventually([&] { return acked->value.has_value(); }));
  auto [ack_ec] = *acked->value;
  auto [item_ec, item] = co_await b.exists(path + "/" + claimed.name, with_ec);
  BOOST_TEST(!item.has_value(), "the delete was to land before the cut");
  BOOST_TEST((ack_ec == dlock::error::removal_uncertain), "A's ack: " << ack_ec.message());
  auto [size_ec, size] = co_await qb.size(with_ec);
  BOOST_TEST(size == 0u);
  co_await delete_tree(b, path);
  co_await delete_tree(b, path + ".claims");
  co_await a.close(with_ec);
  co_await b.close();
}

void run_case(asio::awaitable<void> body) {
  asio::io_context io;
  bool done = false;
  asio::co_spawn(io, std::move(body), [&](std::exception_ptr e) {
    done = true;
    if (e) std::rethrow_exception(e);
  });
  io.run();
  BOOST_TEST(done);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_queue_fault)

BOOST_AUTO_TEST_CASE(take_for_delivers_an_item_whose_removal_outlives_the_deadline) {
  run_case(deadline_during_removal("/" + dlock::test::unique_name("dlock-queue-deadline")));
}

BOOST_AUTO_TEST_CASE(a_no_node_after_an_uncertain_delete_is_reported_not_skipped) {
  run_case(stale_still_there("/" + dlock::test::unique_name("dlock-queue-stale")));
}

BOOST_AUTO_TEST_CASE(a_claim_create_of_unknown_outcome_leaves_no_claim_behind) {
  run_case(unknown_claim_create("/" + dlock::test::unique_name("dlock-queue-claim")));
}

BOOST_AUTO_TEST_CASE(an_ack_retried_across_the_end_of_its_session_deletes_nothing) {
  run_case(ack_across_expiry("/" + dlock::test::unique_name("dlock-queue-ack")));
}

BOOST_AUTO_TEST_CASE(an_ack_whose_delete_landed_before_its_session_ended_is_uncertain_not_lost) {
  run_case(ack_applied_then_expired("/" + dlock::test::unique_name("dlock-queue-ack-landed"), 1500ms));
}

BOOST_AUTO_TEST_CASE(an_ack_cut_off_past_its_retries_waits_for_its_session_to_settle_it) {
  run_case(ack_applied_then_expired("/" + dlock::test::unique_name("dlock-queue-ack-long"), 6s));
}

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
