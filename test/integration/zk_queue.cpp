// dlock::zk::queue against the real standalone ZooKeeper (DLOCK_ZK_HOSTS).
#include <dlock/error.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/queue.hpp>

#include "common/servers.hpp"
#include "common/zk.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace zk = dlock::zk;
using dlock::error_code;
using namespace std::chrono_literals;

namespace {

constexpr auto with_ec = asio::as_tuple(asio::deferred);

zk::options test_options() {
  zk::options o;
  o.hosts = dlock::test::zk_hosts();
  o.session_timeout = 4s;
  return o;
}

// Runs `body` on `io` until it finishes; an exception fails the test.
void run(asio::io_context& io, asio::awaitable<void> body) {
  bool done = false;
  asio::co_spawn(io, std::move(body), [&](std::exception_ptr e) {
    done = true;
    if (e) std::rethrow_exception(e);
  });
  io.run();
  BOOST_REQUIRE(done);
}

int sequence_of(const std::string& name) { return std::stoi(name.substr(name.rfind('-') + 1)); }

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(with_ec);
}

asio::awaitable<void> delete_tree(zk::client& c, std::string path) {
  auto [ec, children, st] = co_await c.get_children(path, with_ec);
  for (const auto& child : children) co_await delete_tree(c, path + "/" + child);
  co_await c.remove(path, -1, with_ec);
}

// ---- semantics on empty and non-empty queues ----

asio::awaitable<void> semantics(std::string path) {
  zk::client c(co_await asio::this_coro::executor, test_options());
  co_await c.connect();
  zk::queue q(c, path);

  auto [poll_ec, nothing] = co_await q.poll(with_ec);
  BOOST_TEST(!poll_ec);
  BOOST_TEST(!nothing.has_value());
  auto [peek_ec, none] = co_await q.peek(with_ec);
  BOOST_TEST(!peek_ec);
  BOOST_TEST(!none.has_value());
  auto [element_ec, e0] = co_await q.element(with_ec);
  BOOST_TEST((element_ec == dlock::error::empty));
  auto [remove_ec, r0] = co_await q.remove(with_ec);
  BOOST_TEST((remove_ec == dlock::error::empty));
  BOOST_TEST(co_await q.size() == 0u);

  std::string first = co_await q.offer("one");
  BOOST_TEST(first.starts_with("qn-"));
  co_await q.offer("two");
  co_await q.offer(std::string("three\0bytes", 11));
  // A child that is not an item is ignored.
  co_await c.create(path + "/not-an-item", "x", zk::create_mode::persistent);
  BOOST_TEST(co_await q.size() == 3u);

  BOOST_TEST(*(co_await q.peek()) == "one");
  BOOST_TEST(co_await q.element() == "one");
  BOOST_TEST(co_await q.size() == 3u);  // peek and element do not remove
  BOOST_TEST(*(co_await q.poll()) == "one");
  BOOST_TEST(co_await q.remove() == "two");
  BOOST_TEST(co_await q.take() == std::string("three\0bytes", 11));
  BOOST_TEST(!(co_await q.poll()).has_value());
  BOOST_TEST(co_await q.size() == 0u);
  co_await delete_tree(c, path);
  co_await c.close();
}

// ---- many producers and consumers ----

struct tally {
  std::map<std::string, int> sequence_of_item;                // from the producers' offers
  std::map<int, std::vector<std::string>> taken_by_consumer;  // in take order
};

asio::awaitable<void> produce(zk::client& c, std::string path, int producer, int count, std::shared_ptr<tally> t) {
  zk::queue q(c, path);
  for (int i = 0; i < count; ++i) {
    std::string item = "p" + std::to_string(producer) + "-" + std::to_string(i);
    std::string name = co_await q.offer(item);
    t->sequence_of_item[item] = sequence_of(name);
  }
}

asio::awaitable<void> consume(zk::client& c, std::string path, int consumer, int count, std::shared_ptr<tally> t) {
  zk::queue q(c, path);
  for (int i = 0; i < count; ++i) t->taken_by_consumer[consumer].push_back(co_await q.take());
}

asio::awaitable<void> producers_and_consumers(std::string path, int per_producer, std::shared_ptr<tally> t) {
  auto ex = co_await asio::this_coro::executor;
  // Two sessions, so consumers also race across sessions.
  zk::client a(ex, test_options()), b(ex, test_options());
  co_await a.connect();
  co_await b.connect();
  int finished = 0;
  auto track = [&finished](std::exception_ptr e) {
    ++finished;
    if (e) std::rethrow_exception(e);
  };
  for (int i = 0; i < 4; ++i) asio::co_spawn(ex, consume(i % 2 ? a : b, path, i, per_producer, t), track);
  for (int i = 0; i < 4; ++i) asio::co_spawn(ex, produce(i % 2 ? b : a, path, i, per_producer, t), track);
  while (finished < 8) co_await sleep_for(20ms);
  zk::queue q(a, path);
  BOOST_TEST(co_await q.size() == 0u);
  co_await delete_tree(a, path);
  co_await a.close();
  co_await b.close();
}

// ---- take waits, and can be cancelled ----

asio::awaitable<void> offer_later(zk::queue& q, std::string item) {
  co_await sleep_for(200ms);
  co_await q.offer(item);
}

asio::awaitable<void> take_waits_and_cancels(std::string path) {
  auto ex = co_await asio::this_coro::executor;
  zk::client c(ex, test_options());
  co_await c.connect();
  zk::queue q(c, path);
  // take() on an empty queue wakes when an item arrives.
  asio::co_spawn(ex, offer_later(q, "late"), asio::detached);
  BOOST_TEST(co_await q.take() == "late");

  // A cancelled take completes with operation_aborted and takes nothing.
  asio::cancellation_signal cancel;
  error_code take_ec;
  bool take_done = false;
  q.take(asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec, std::string) {
    take_ec = ec;
    take_done = true;
  }));
  co_await sleep_for(100ms);
  BOOST_TEST(!take_done);
  cancel.emit(asio::cancellation_type::terminal);
  while (!take_done) co_await sleep_for(5ms);
  BOOST_TEST((take_ec == asio::error::operation_aborted));
  co_await q.offer("kept");
  co_await sleep_for(50ms);
  BOOST_TEST(co_await q.size() == 1u);  // the cancelled take did not consume it
  BOOST_TEST(co_await q.take() == "kept");
  co_await delete_tree(c, path);
  co_await c.close();
}

// ---- item size ----

asio::awaitable<void> item_size_limit(std::string path) {
  zk::client c(co_await asio::this_coro::executor, test_options());
  co_await c.connect();
  zk::queue q(c, path);
  zk::queue_options defaults;
  std::string largest(defaults.max_item_size, 'x');
  co_await q.offer(largest);  // the default limit is one the server accepts
  auto [ec, name] = co_await q.offer(largest + "x", with_ec);
  BOOST_TEST((ec == dlock::error::invalid_argument));
  BOOST_TEST(co_await q.size() == 1u);
  BOOST_TEST(co_await q.take() == largest);
  zk::queue bad(c, "no-leading-slash");
  auto [bad_ec, bad_name] = co_await bad.offer("x", with_ec);
  BOOST_TEST((bad_ec == dlock::error::invalid_argument));
  co_await delete_tree(c, path);
  co_await c.close();
}

// ---- claim / ack ----

asio::awaitable<void> claim_and_ack(std::string path) {
  auto ex = co_await asio::this_coro::executor;
  zk::client a(ex, test_options()), b(ex, test_options());
  co_await a.connect();
  co_await b.connect();
  zk::queue qa(a, path), qb(b, path);
  co_await qa.offer("first");
  co_await qa.offer("second");

  zk::claimed_item one = co_await qa.take_claimed();
  BOOST_TEST(one.data == "first");
  zk::claimed_item two = co_await qb.take_claimed();  // "first" is claimed: b gets the next
  BOOST_TEST(two.data == "second");
  co_await qb.release(two);                           // given back...
  zk::claimed_item again = co_await qb.take_claimed();  // ...and claimable again
  BOOST_TEST(again.data == "second");
  co_await qa.ack(one);
  co_await qb.ack(again);
  BOOST_TEST(co_await qa.size() == 0u);

  // An item claimed by a session that expires before ack returns to the queue.
  co_await qa.offer("survives");
  zk::claimed_item doomed = co_await qa.take_claimed();
  BOOST_TEST(doomed.data == "survives");
  BOOST_TEST(co_await dlock::test::expire_session(a, test_options()));
  zk::claimed_item redelivered = co_await qb.take_claimed();
  BOOST_TEST(redelivered.data == "survives");
  auto [late_ack] = co_await qa.ack(doomed, with_ec);
  BOOST_TEST(late_ack, "an ack after the claim expired must fail");
  co_await qb.ack(redelivered);
  BOOST_TEST(co_await qb.size() == 0u);
  co_await delete_tree(b, path);
  co_await delete_tree(b, path + ".claims");
  co_await a.close(with_ec);
  co_await b.close();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_queue)

BOOST_AUTO_TEST_CASE(operations_on_empty_and_non_empty_queues) {
  asio::io_context io;
  run(io, semantics("/" + dlock::test::unique_name("dlock-queue")));
}

BOOST_AUTO_TEST_CASE(four_producers_four_consumers_exactly_once_in_order) {
  constexpr int per_producer = 2500;
  auto t = std::make_shared<tally>();
  asio::io_context io;
  run(io, producers_and_consumers("/" + dlock::test::unique_name("dlock-queue"), per_producer, t));

  BOOST_TEST(t->sequence_of_item.size() == 4u * per_producer);
  std::set<std::string> seen;
  for (const auto& [consumer, items] : t->taken_by_consumer) {
    int previous = -1;
    for (const auto& item : items) {
      BOOST_TEST(seen.insert(item).second, "item " << item << " delivered twice");
      auto it = t->sequence_of_item.find(item);
      BOOST_REQUIRE(it != t->sequence_of_item.end());
      // Each take returns the lowest item present when it looked, so one
      // consumer's items come in strictly increasing sequence order.
      BOOST_TEST(it->second > previous, "consumer " << consumer << " took " << it->second << " after " << previous);
      previous = it->second;
    }
  }
  BOOST_TEST(seen.size() == 4u * per_producer);
}

BOOST_AUTO_TEST_CASE(take_waits_for_an_item_and_can_be_cancelled) {
  asio::io_context io;
  run(io, take_waits_and_cancels("/" + dlock::test::unique_name("dlock-queue")));
}

BOOST_AUTO_TEST_CASE(items_over_the_size_limit_are_refused_before_sending) {
  asio::io_context io;
  run(io, item_size_limit("/" + dlock::test::unique_name("dlock-queue")));
}

BOOST_AUTO_TEST_CASE(claim_ack_release_and_redelivery_after_session_expiry) {
  asio::io_context io;
  run(io, claim_and_ack("/" + dlock::test::unique_name("dlock-queue")));
}

BOOST_AUTO_TEST_SUITE_END()
