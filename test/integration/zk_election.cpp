// dlock::zk::leader_election against the real standalone ZooKeeper.
#include <dlock/error.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/leader_election.hpp>

#include "common/run.hpp"
#include "common/servers.hpp"
#include "common/zk.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace zk = dlock::zk;
using dlock::error_code;
using namespace std::chrono_literals;

namespace {

using dlock::test::run;
using dlock::test::sleep_for;
using dlock::test::delete_tree;
using dlock::test::with_ec;

zk::options test_options() {
  zk::options o;
  o.hosts = dlock::test::zk_hosts();
  o.session_timeout = 4s;
  return o;
}

struct record {
  std::optional<std::string> leader;        // who leads now, as the candidates see it
  std::vector<std::string> terms;           // leaders in order
  std::vector<std::int64_t> tokens;         // their fencing tokens
  std::vector<std::vector<std::string>> observed;  // per observer, leaders in order
  int overlaps = 0;
  int finished = 0;
};

bool seen_by_all(const record& r, const std::string& id) {
  return std::all_of(r.observed.begin(), r.observed.end(), [&](const auto& seen) {
    return std::find(seen.begin(), seen.end(), id) != seen.end();
  });
}

asio::awaitable<void> candidate(zk::client& c, std::string path, std::string id, std::chrono::milliseconds start,
                                std::shared_ptr<record> r) {
  co_await sleep_for(start);  // staggered, so creation order is known
  zk::leader_election e(c, path);
  co_await e.campaign(id);
  if (r->leader) ++r->overlaps;
  r->leader = id;
  r->terms.push_back(id);
  r->tokens.push_back(e.fencing_token());
  BOOST_TEST(e.is_leader());
  auto [current_ec, current] = co_await e.leader(with_ec);
  BOOST_TEST((current == std::optional<std::string>(id)));
  // Hold until every observer has seen this term: deterministic, not timed.
  while (!seen_by_all(*r, id)) co_await sleep_for(5ms);
  r->leader.reset();
  co_await e.resign();
  ++r->finished;
}

asio::awaitable<void> observer(zk::client& c, std::string path, std::size_t index, std::size_t terms,
                               std::shared_ptr<record> r) {
  zk::leader_election e(c, path);
  std::optional<std::string> last;
  while (r->observed[index].size() < terms) {
    last = co_await e.observe(last);
    if (last) r->observed[index].push_back(*last);
  }
}

asio::awaitable<void> five_candidates(std::string path, std::shared_ptr<record> r) {
  auto ex = co_await asio::this_coro::executor;
  zk::client a(ex, test_options()), b(ex, test_options()), c(ex, test_options());
  co_await a.connect();
  co_await b.connect();
  co_await c.connect();
  zk::client* sessions[] = {&a, &b, &c};
  r->observed.resize(2);
  asio::co_spawn(ex, observer(a, path, 0, 5, r), asio::detached);
  asio::co_spawn(ex, observer(c, path, 1, 5, r), asio::detached);
  for (int i = 0; i < 5; ++i)
    asio::co_spawn(ex, candidate(*sessions[i % 3], path, "candidate-" + std::to_string(i), std::chrono::milliseconds(100 * i), r),
                   asio::detached);
  while (r->finished < 5) co_await sleep_for(10ms);
  zk::leader_election e(a, path);
  auto [ec, nobody] = co_await e.leader(with_ec);
  BOOST_TEST(!ec);
  BOOST_TEST(!nobody.has_value());
  co_await delete_tree(a, path);
  co_await a.close();
  co_await b.close();
  co_await c.close();
}

asio::awaitable<void> expiry_hands_over(std::string path) {
  auto ex = co_await asio::this_coro::executor;
  zk::client a(ex, test_options()), b(ex, test_options());
  co_await a.connect();
  co_await b.connect();
  zk::leader_election first(a, path), second(b, path);
  co_await first.campaign("first");
  asio::cancellation_signal on_loss;
  first.loss().bind(on_loss);
  error_code loss_reason;
  bool loss_seen = false;
  first.loss().wait([&](error_code ec) {
    loss_reason = ec;
    loss_seen = true;
  });

  bool second_leads = false;
  second.campaign("second", [&](error_code ec) { second_leads = !ec; });
  co_await sleep_for(200ms);
  BOOST_TEST(!second_leads);

  BOOST_TEST(co_await dlock::test::expire_session(a, test_options()));

  while (!second_leads || !loss_seen) co_await sleep_for(10ms);
  BOOST_TEST(second.is_leader());
  BOOST_TEST(loss_reason, "the old leader is told why");
  BOOST_TEST(!first.is_leader());
  auto [ec, now] = co_await second.leader(with_ec);
  BOOST_TEST((now == std::optional<std::string>("second")));
  BOOST_TEST(second.fencing_token() > 0);
  co_await second.resign();
  co_await delete_tree(b, path);
  co_await a.close(with_ec);
  co_await b.close();
}

asio::awaitable<void> cancelled_campaign_leaves_no_node(std::string path) {
  auto ex = co_await asio::this_coro::executor;
  zk::client a(ex, test_options());
  co_await a.connect();
  zk::leader_election leader(a, path), hopeful(a, path);
  co_await leader.campaign("leader");
  asio::cancellation_signal cancel;
  error_code result;
  bool done = false;
  hopeful.campaign("hopeful", asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec) {
    result = ec;
    done = true;
  }));
  co_await sleep_for(200ms);
  cancel.emit(asio::cancellation_type::terminal);
  while (!done) co_await sleep_for(5ms);
  BOOST_TEST((result == asio::error::operation_aborted));
  co_await sleep_for(200ms);  // the cleanup delete is not the caller's: give it its round trip
  auto [ec, children, st] = co_await a.get_children(path, with_ec);
  BOOST_TEST(children.size() == 1u, "only the leader's node remains");
  co_await leader.resign();
  co_await delete_tree(a, path);
  co_await a.close();
}

// F12j: two candidates with the same identifier (the default one is
// "<hostname>:<pid>", shared by one process's candidates). An observer that
// saw the first lead is told when the second takes over, though the data
// it reads is the same.
asio::awaitable<void> same_identifier_handover(std::string path, std::shared_ptr<bool> told) {
  auto ex = co_await asio::this_coro::executor;
  zk::client a(ex, test_options());
  co_await a.connect();
  zk::leader_election first(a, path), second(a, path), watcher(a, path);
  co_await first.campaign("same-id");
  auto second_done = std::make_shared<bool>(false);
  second.campaign("same-id", [second_done](error_code) { *second_done = true; });
  auto [ec, seen] = co_await watcher.leader(with_ec);
  BOOST_REQUIRE(!ec);
  BOOST_REQUIRE((seen == std::optional<std::string>("same-id")));
  watcher.observe(seen, [told](error_code, std::optional<std::string>) { *told = true; });
  co_await sleep_for(200ms);
  BOOST_REQUIRE(!*told);  // nothing changed yet
  co_await first.resign();
  for (int i = 0; i < 250 && !(*told && *second_done); ++i) co_await sleep_for(20ms);
  BOOST_TEST(*second_done, "the second candidate did not take over");
  BOOST_TEST(*told, "the observer was not told of the handover within 5 s");
  if (*second_done) co_await second.resign();
  co_await delete_tree(a, path);
  co_await a.close();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_election)

BOOST_AUTO_TEST_CASE(observers_see_a_handover_between_candidates_of_one_identifier) {
  auto told = std::make_shared<bool>(false);
  asio::io_context io;
  run(io, same_identifier_handover("/" + dlock::test::unique_name("dlock-election"), told));
}

BOOST_AUTO_TEST_CASE(one_leader_at_a_time_in_creation_order_and_observers_see_every_change) {
  auto r = std::make_shared<record>();
  asio::io_context io;
  run(io, five_candidates("/" + dlock::test::unique_name("dlock-election"), r));
  BOOST_TEST(r->overlaps == 0);
  std::vector<std::string> expected;
  for (int i = 0; i < 5; ++i) expected.push_back("candidate-" + std::to_string(i));
  BOOST_TEST(r->terms == expected, boost::test_tools::per_element());
  for (const auto& seen : r->observed) BOOST_TEST(seen == expected, boost::test_tools::per_element());
  for (std::size_t i = 1; i < r->tokens.size(); ++i) BOOST_TEST(r->tokens[i] > r->tokens[i - 1]);
}

BOOST_AUTO_TEST_CASE(session_expiry_hands_leadership_to_the_next_candidate) {
  asio::io_context io;
  run(io, expiry_hands_over("/" + dlock::test::unique_name("dlock-election")));
}

BOOST_AUTO_TEST_CASE(a_cancelled_campaign_leaves_no_node) {
  asio::io_context io;
  run(io, cancelled_campaign_leaves_no_node("/" + dlock::test::unique_name("dlock-election")));
}

BOOST_AUTO_TEST_SUITE_END()
