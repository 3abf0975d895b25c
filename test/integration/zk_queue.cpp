// dlock::zk::queue against the real standalone ZooKeeper (DLOCK_ZK_HOSTS).
#include <dlock/error.hpp>
#include <dlock/observer.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/queue.hpp>

#include "common/run.hpp"
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
#include <optional>
#include <set>
#include <string>
#include <tuple>
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

int sequence_of(const std::string& name) { return std::stoi(name.substr(name.rfind('-') + 1)); }

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

// ---- a take with a deadline loses no item ----

// One take that gives up after `limit`: the item, or nothing.
using take_within = asio::awaitable<std::optional<std::string>> (*)(zk::queue&, std::chrono::milliseconds);

// The queue's own deadline.
asio::awaitable<std::optional<std::string>> take_for(zk::queue& q, std::chrono::milliseconds limit) {
  auto [ec, item] = co_await q.take_for(limit, with_ec);
  if (ec == dlock::error::timed_out) co_return std::nullopt;
  if (ec) throw boost::system::system_error(ec);
  co_return item;
}

// README pattern 2: a timer emits on a cancellation slot bound to the take,
// and the take's completion is read whoever won (a take cancelled during
// its item's removal completes with the item).
asio::awaitable<std::optional<std::string>> take_with_a_bound_slot(zk::queue& q, std::chrono::milliseconds limit) {
  // Shared with the timer's handler, which may run after this frame is gone
  // (a timer that expires as the operation completes): it emits only while
  // the operation is under way.
  struct stopper {
    asio::cancellation_signal signal;
    bool done = false;
  };
  auto stop = std::make_shared<stopper>();
  asio::steady_timer timer(co_await asio::this_coro::executor, limit);
  timer.async_wait([stop](error_code ec) {
    if (!ec && !stop->done) stop->signal.emit(asio::cancellation_type::terminal);
  });
  auto [ec, item] = co_await q.take(asio::bind_cancellation_slot(stop->signal.slot(), asio::as_tuple(asio::use_awaitable)));
  stop->done = true;
  timer.cancel();
  if (ec == asio::error::operation_aborted) co_return std::nullopt;
  if (ec) throw boost::system::system_error(ec);
  co_return item;
}

asio::awaitable<void> offer_slowly(zk::client& c, std::string path, int count, std::shared_ptr<bool> done) {
  zk::queue q(c, path);
  for (int i = 0; i < count; ++i) {
    co_await q.offer("item-" + std::to_string(i));
    co_await sleep_for(std::chrono::milliseconds(i % 3));
  }
  *done = true;
}

// A consumer takes with a short deadline in a loop while another client
// offers `count` items: every item is received exactly once or left in the queue.
// Counts what the queue's observer is told of its takes and polls.
struct take_counter final : dlock::observer {
  int taken = 0, empty = 0, given_up = 0, other = 0;
  void on_queue_taken(const dlock::queue_taken& e) noexcept override {
    if (!e.outcome) ++taken;
    else if (e.outcome == dlock::error::empty) ++empty;
    else if (e.outcome == dlock::error::timed_out || e.outcome == asio::error::operation_aborted) ++given_up;
    else ++other;
  }
};

// With an observer, each take runs inside the observer's wrapper coroutine
// (src/zk/queue/reported.hpp): its cancellation and deadline must reach the
// take through it, and each take be told once, as it ended.
asio::awaitable<void> deadline_takes_lose_nothing(std::string path, take_within take, bool observed = false) {
  constexpr int count = 150;
  auto ex = co_await asio::this_coro::executor;
  zk::client producer(ex, test_options()), consumer(ex, test_options());
  co_await producer.connect();
  co_await consumer.connect();
  auto done = std::make_shared<bool>(false);
  asio::co_spawn(ex, offer_slowly(producer, path, count, done), asio::detached);
  auto told = std::make_shared<take_counter>();
  zk::queue_options qo;
  if (observed) qo.observer = told;
  zk::queue q(consumer, path, qo);
  std::multiset<std::string> received;
  int timeouts = 0;
  for (int i = 0; !*done || i % 50 != 0; ++i) {
    if (auto item = co_await take(q, std::chrono::milliseconds(1 + i % 3))) received.insert(*item);
    else ++timeouts;
  }
  std::multiset<std::string> left;
  while (auto item = co_await q.poll()) left.insert(*item);
  BOOST_TEST_MESSAGE(received.size() << " received, " << left.size() << " left, " << timeouts << " timeouts");
  if (observed) {
    BOOST_TEST(told->taken == static_cast<int>(received.size() + left.size()));
    BOOST_TEST(told->given_up == timeouts);
    BOOST_TEST(told->empty == 1);  // the last poll
    BOOST_TEST(told->other == 0);
  }
  for (int i = 0; i < count; ++i) {
    std::string item = "item-" + std::to_string(i);
    BOOST_TEST(received.count(item) + left.count(item) == 1u, item << ": received " << received.count(item)
                                                                     << ", left " << left.count(item));
  }
  co_await delete_tree(producer, path);
  co_await producer.close();
  co_await consumer.close();
}

// ---- claims are deleted only by their owner ----

asio::awaitable<std::tuple<error_code, zk::claimed_item>> take_claimed_within(zk::queue& q,
                                                                              std::chrono::milliseconds limit) {
  // Shared with the timer's handler, which may run after this frame is gone
  // (a timer that expires as the operation completes): it emits only while
  // the operation is under way.
  struct stopper {
    asio::cancellation_signal signal;
    bool done = false;
  };
  auto stop = std::make_shared<stopper>();
  asio::steady_timer timer(co_await asio::this_coro::executor, limit);
  timer.async_wait([stop](error_code ec) {
    if (!ec && !stop->done) stop->signal.emit(asio::cancellation_type::terminal);
  });
  auto result = co_await q.take_claimed(asio::bind_cancellation_slot(stop->signal.slot(), asio::as_tuple(asio::use_awaitable)));
  stop->done = true;
  timer.cancel();
  co_return result;
}

// A claims an item, A's session expires, B claims the item: A's release and
// ack must fail and delete nothing, so C does not get the item B is processing.
asio::awaitable<void> stale_claimant(std::string path) {
  auto ex = co_await asio::this_coro::executor;
  zk::client a(ex, test_options()), b(ex, test_options()), c(ex, test_options());
  co_await a.connect();
  co_await b.connect();
  co_await c.connect();
  zk::queue qa(a, path), qb(b, path), qc(c, path);
  co_await qa.offer("once");
  zk::claimed_item stale = co_await qa.take_claimed();
  BOOST_REQUIRE(co_await dlock::test::expire_session(a, test_options()));
  zk::claimed_item current = co_await qb.take_claimed();
  BOOST_TEST(current.name == stale.name);

  auto [released] = co_await qa.release(stale, with_ec);
  BOOST_TEST((released == dlock::error::lost), "A's release after its claim expired: " << released.message());
  auto [acked] = co_await qa.ack(stale, with_ec);
  BOOST_TEST((acked == dlock::error::lost), "A's ack after its claim expired: " << acked.message());
  auto [exists_ec, claim] = co_await b.exists(path + ".claims/" + current.name, with_ec);
  BOOST_TEST((claim && claim->ephemeral_owner == b.session_id()), "B's claim must survive A's release");
  auto [c_ec, c_item] = co_await take_claimed_within(qc, 500ms);
  BOOST_TEST((c_ec == asio::error::operation_aborted), "C must not get the item B holds: got '" << c_item.data << "'");

  // B releases twice: the second release finds no claim of B's, says so and deletes nothing.
  co_await qb.release(current);
  zk::claimed_item again = co_await qc.take_claimed();
  auto [twice] = co_await qb.release(current, with_ec);
  BOOST_TEST((twice == dlock::error::lost), "a second release: " << twice.message());
  co_await qc.ack(again);
  BOOST_TEST(co_await qc.size() == 0u);
  co_await delete_tree(c, path);
  co_await delete_tree(c, path + ".claims");
  co_await a.close(with_ec);
  co_await b.close();
  co_await c.close();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_queue)

// A take whose deadline passes during its item's removal delivers the item
// (the README's former `take() || timer` loop lost about one item in six).
BOOST_AUTO_TEST_CASE(take_for_in_a_loop_loses_no_item) {
  asio::io_context io;
  run(io, deadline_takes_lose_nothing("/" + dlock::test::unique_name("dlock-queue"), &take_for));
}

BOOST_AUTO_TEST_CASE(take_with_a_cancellation_slot_in_a_loop_loses_no_item) {
  asio::io_context io;
  run(io, deadline_takes_lose_nothing("/" + dlock::test::unique_name("dlock-queue"), &take_with_a_bound_slot));
}

BOOST_AUTO_TEST_CASE(observed_takes_with_a_deadline_or_a_slot_lose_no_item_and_are_each_told) {
  asio::io_context io;
  run(io, deadline_takes_lose_nothing("/" + dlock::test::unique_name("dlock-queue"), &take_for, true));
  asio::io_context io2;
  run(io2, deadline_takes_lose_nothing("/" + dlock::test::unique_name("dlock-queue"), &take_with_a_bound_slot, true));
}

BOOST_AUTO_TEST_CASE(a_stale_claimant_releases_and_acks_nothing) {
  asio::io_context io;
  run(io, stale_claimant("/" + dlock::test::unique_name("dlock-queue")));
}

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
