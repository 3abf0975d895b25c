// dlock::zk::mutex, shared_mutex, simple_lock and with_lock against a real
// ZooKeeper server (DLOCK_ZK_HOSTS).
#include "common/servers.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/error.hpp>
#include <dlock/with_lock.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/error.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/shared_mutex.hpp>
#include <dlock/zk/simple_lock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

using namespace dlock;
using namespace std::chrono_literals;
using dlock::test::run_coroutine;
using dlock::test::sleep_for;

namespace {

zk::options options() { return dlock::test::zk_options(dlock::test::zk_hosts()); }

std::string lock_path(const std::string& name) { return "/dlock-test/locks/" + dlock::test::unique_name(name); }

asio::awaitable<std::vector<std::string>> children_of(zk::client& zk, std::string path) {
  auto [ec, children, st] = co_await zk.get_children(path, asio::as_tuple(asio::deferred));
  if (ec == zk::error::no_node) co_return std::vector<std::string>{};
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  std::sort(children.begin(), children.end(), [](const std::string& a, const std::string& b) {
    return a.substr(a.size() - 10) < b.substr(b.size() - 10);
  });
  co_return children;
}

std::string basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// Waits (polling, no timing assertion) until `m` has created its node.
asio::awaitable<void> wait_for_node(zk::mutex& m) {
  while (m.node_path().empty()) co_await sleep_for(1ms);
}

// Until the client has received `target` replies in all (at most 30 s).
asio::awaitable<void> wait_for_replies(zk::client& zk, std::uint64_t target) {
  for (int i = 0; i < 6000 && zk.stats().replies_received < target; ++i) co_await sleep_for(5ms);
  BOOST_REQUIRE_GE(zk.stats().replies_received, target);
}

// --- basics and bad input ---

asio::awaitable<void> basics() {
  zk::client zk(co_await asio::this_coro::executor, options());
  co_await zk.connect();
  auto path = lock_path("basics");
  zk::lock_options opts;
  opts.identifier = "worker-1";
  zk::mutex m(zk, path, opts);

  auto [not_held] = co_await m.release(asio::as_tuple(asio::deferred));
  BOOST_TEST(not_held == make_error_code(dlock::error::not_held));

  co_await m.acquire();
  BOOST_TEST(m.held());
  BOOST_TEST(m.fencing_token() > 0);
  auto children = co_await children_of(zk, path);
  BOOST_REQUIRE(children.size() == 1u);
  // Curator's InterProcessMutex name: _c_<uuid36>-lock-<10 digits>.
  const auto& name = children[0];
  BOOST_TEST(name.size() == 3u + 36 + 1 + 5 + 10);
  BOOST_TEST(name.starts_with("_c_"));
  BOOST_TEST(name.substr(39, 6) == "-lock-");
  BOOST_TEST(m.node_path() == path + "/" + name);
  auto [gec, data, st] = co_await zk.get(m.node_path(), asio::as_tuple(asio::deferred));
  BOOST_TEST(!gec);
  BOOST_TEST(data == "worker-1");
  BOOST_TEST(st.czxid == m.fencing_token());
  BOOST_TEST(st.ephemeral_owner == zk.session_id());

  auto people = co_await m.participants();
  BOOST_TEST(people == std::vector<std::string>{"worker-1"});

  auto [twice] = co_await m.acquire(asio::as_tuple(asio::deferred));
  BOOST_TEST(twice == make_error_code(dlock::error::already_held));
  BOOST_TEST((co_await children_of(zk, path)).size() == 1u);

  co_await m.release();
  BOOST_TEST(!m.held());
  BOOST_TEST(m.fencing_token() == 0);
  BOOST_TEST((co_await children_of(zk, path)).empty());
  auto [again] = co_await m.release(asio::as_tuple(asio::deferred));
  BOOST_TEST(!again);  // idempotent

  // Tokens grow across holders, even when the parent is deleted and recreated.
  co_await m.acquire();
  auto first = m.fencing_token();
  co_await m.release();
  co_await zk.remove(path);  // (the container may already be reaped)
  co_await m.acquire();
  BOOST_TEST(m.fencing_token() > first);
  co_await m.release();
  co_await zk.close();
}

BOOST_AUTO_TEST_SUITE(zk_lock)

BOOST_AUTO_TEST_CASE(acquire_release_names_tokens_and_errors) {
  asio::io_context io;
  run_coroutine(io, basics());
}

// The client should outlive its locks, but a program that gets the order
// wrong (or a release still retrying in the background) must meet a closed
// session, never freed memory: ASan checks the lock's background release here.
asio::awaitable<void> client_destroyed_before_its_lock() {
  auto ex = co_await asio::this_coro::executor;
  auto path = lock_path("client-first");
  auto first = std::make_unique<zk::client>(ex, options());
  co_await first->connect();
  auto held = std::make_unique<zk::mutex>(*first, path);
  co_await held->acquire();
  first.reset();
  held.reset();  // starts a release on the closed session
  co_await sleep_for(50ms);
  // The node went with the session: another client gets the lock.
  zk::client second(ex, options());
  co_await second.connect();
  zk::mutex again(second, path);
  co_await again.acquire_for(std::chrono::seconds(30));
  co_await again.release();
}

BOOST_AUTO_TEST_CASE(client_destroyed_before_its_lock_is_safe) {
  asio::io_context io;
  run_coroutine(io, client_destroyed_before_its_lock());
}

asio::awaitable<void> bad_input() {
  zk::client zk(co_await asio::this_coro::executor, options());
  co_await zk.connect();
  std::vector<std::string> bad_paths{"", "relative", "/trailing/", "/double//slash", "/", std::string("/nul\0x", 6)};
  for (const auto& bad : bad_paths) {
    zk::mutex m(zk, bad);
    auto [ec] = co_await m.acquire(asio::as_tuple(asio::deferred));
    BOOST_TEST(ec == make_error_code(dlock::error::invalid_argument), "path '" << bad << "'");
    auto [tec] = co_await m.try_acquire(asio::as_tuple(asio::deferred));
    BOOST_TEST(tec == make_error_code(dlock::error::invalid_argument));
  }
  auto path = lock_path("bad");
  zk::mutex m(zk, path);
  auto [zero] = co_await m.acquire_for(0ms, asio::as_tuple(asio::deferred));
  BOOST_TEST(zero == make_error_code(dlock::error::invalid_argument));
  auto [exists_ec, st] = co_await zk.exists(path, asio::as_tuple(asio::deferred));
  BOOST_TEST(!exists_ec);
  BOOST_TEST(!st.has_value());  // nothing was sent for the bad calls
  co_await zk.close();
  auto [closed] = co_await m.acquire(asio::as_tuple(asio::deferred));
  BOOST_TEST(closed == make_error_code(dlock::error::closed));
}

BOOST_AUTO_TEST_CASE(bad_input_fails_at_once_and_leaves_nothing) {
  asio::io_context io;
  run_coroutine(io, bad_input());
}

// --- mutual exclusion: 3 sessions x 16 coroutines x 50 ---

struct exclusion_log {
  int inside = 0;
  int overlaps = 0;
  std::vector<std::int64_t> tokens;  // in acquisition order
};

asio::awaitable<void> exclusion_worker(zk::client& zk, std::string path, std::shared_ptr<exclusion_log> log,
                                       int rounds) {
  zk::mutex m(zk, path);
  for (int i = 0; i < rounds; ++i) {
    co_await m.acquire();
    if (++log->inside != 1) ++log->overlaps;
    log->tokens.push_back(m.fencing_token());
    co_await sleep_for(0ms);  // let others run while we are inside
    if (log->inside != 1) ++log->overlaps;
    --log->inside;
    co_await m.release();
  }
}

asio::awaitable<void> spawn_and_join(std::vector<asio::awaitable<void>> tasks) {
  auto ex = co_await asio::this_coro::executor;
  using op_type = decltype(asio::co_spawn(ex, asio::awaitable<void>{}, asio::deferred));
  std::vector<op_type> ops;
  for (auto& t : tasks) ops.push_back(asio::co_spawn(ex, std::move(t), asio::deferred));
  auto [order, failures] = co_await asio::experimental::make_parallel_group(std::move(ops))
                               .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
  for (auto& f : failures)
    if (f) std::rethrow_exception(f);
}

asio::awaitable<void> mutual_exclusion() {
  auto ex = co_await asio::this_coro::executor;
  std::vector<std::unique_ptr<zk::client>> sessions;
  for (int i = 0; i < 3; ++i) {
    sessions.push_back(std::make_unique<zk::client>(ex, options()));
    co_await sessions.back()->connect();
  }
  auto path = lock_path("exclusion");
  auto log = std::make_shared<exclusion_log>();
  std::vector<asio::awaitable<void>> tasks;
  for (auto& s : sessions)
    for (int c = 0; c < 16; ++c) tasks.push_back(exclusion_worker(*s, path, log, 50));
  co_await spawn_and_join(std::move(tasks));
  BOOST_TEST(log->overlaps == 0);
  BOOST_TEST(log->tokens.size() == 3u * 16 * 50);
  bool increasing = std::adjacent_find(log->tokens.begin(), log->tokens.end(), std::greater_equal<>()) ==
                    log->tokens.end();
  BOOST_TEST(increasing, "fencing tokens strictly increase in acquisition order");
  BOOST_TEST((co_await children_of(*sessions[0], path)).empty());
  for (auto& s : sessions) co_await s->close();
}

BOOST_AUTO_TEST_CASE(mutual_exclusion_3_sessions_16_coroutines_50_rounds) {
  asio::io_context io;
  run_coroutine(io, mutual_exclusion());
}

// --- fairness and herd ---

struct order_log {
  std::vector<std::string> acquired_nodes;  // node names in acquisition order
  std::vector<std::uint64_t> events_at_acquire;
};

asio::awaitable<void> queue_worker(zk::client& zk, zk::mutex& m, std::shared_ptr<order_log> log) {
  co_await m.acquire();
  log->acquired_nodes.push_back(basename(m.node_path()));
  log->events_at_acquire.push_back(zk.stats().watch_events_delivered);
  co_await m.release();
}

asio::awaitable<void> fairness_and_herd(int waiters) {
  auto ex = co_await asio::this_coro::executor;
  zk::client holder_zk(ex, options());
  zk::client zk(ex, options());
  co_await holder_zk.connect();
  co_await zk.connect();
  auto path = lock_path("fair");
  zk::mutex holder(holder_zk, path);
  co_await holder.acquire();

  std::vector<std::unique_ptr<zk::mutex>> mutexes;
  auto log = std::make_shared<order_log>();
  auto replies_before = zk.stats().replies_received;
  for (int i = 0; i < waiters; ++i) {
    mutexes.push_back(std::make_unique<zk::mutex>(zk, path));
    asio::co_spawn(ex, queue_worker(zk, *mutexes.back(), log), asio::detached);
  }
  // Each waiter creates and lists (two replies), then arms its watch on the
  // node before it (one): once all are in, the queue is steady.
  co_await wait_for_replies(zk, replies_before + 3 * static_cast<std::uint64_t>(waiters));
  auto created_order = co_await children_of(zk, path);
  BOOST_REQUIRE(created_order.size() == static_cast<std::size_t>(waiters) + 1);
  auto events_before = zk.stats().watch_events_delivered;
  co_await holder.release();
  while (log->acquired_nodes.size() < static_cast<std::size_t>(waiters)) co_await sleep_for(5ms);

  created_order.erase(created_order.begin());  // the holder's
  BOOST_TEST(log->acquired_nodes == created_order, "waiters acquire in node-creation order");
  // Herd-free: each release woke exactly one waiter.
  auto previous = events_before;
  for (auto at : log->events_at_acquire) {
    BOOST_TEST(at - previous == 1u);
    previous = at;
  }
  BOOST_TEST(zk.stats().watch_events_delivered - events_before == static_cast<std::uint64_t>(waiters));
  co_await zk.close();
  co_await holder_zk.close();
}

BOOST_AUTO_TEST_CASE(fair_and_herd_free_with_50_waiters) {
  asio::io_context io;
  run_coroutine(io, fairness_and_herd(50));
}

// Holds for a moment: a release right after the acquire can reach the server
// before the other waiters' watches, which then find no node and retry
// without a watch event (the herd runs, unseen: CI saw 50 events for 50).
asio::awaitable<void> simple_worker(zk::simple_lock& l, std::shared_ptr<int> done) {
  co_await l.acquire();
  co_await sleep_for(std::chrono::milliseconds(10));
  co_await l.release();
  ++*done;
}

asio::awaitable<void> simple_lock_herd(int waiters) {
  auto ex = co_await asio::this_coro::executor;
  zk::client holder_zk(ex, options());
  zk::client zk(ex, options());
  co_await holder_zk.connect();
  co_await zk.connect();
  auto path = lock_path("simple");
  zk::simple_lock holder(holder_zk, path);
  co_await holder.acquire();
  BOOST_TEST(holder.fencing_token() > 0);
  zk::simple_lock tryer(zk, path);
  auto [taken] = co_await tryer.try_acquire(asio::as_tuple(asio::deferred));
  BOOST_TEST(taken == make_error_code(dlock::error::taken));

  std::vector<std::unique_ptr<zk::simple_lock>> locks;
  auto done = std::make_shared<int>(0);
  auto replies_before = zk.stats().replies_received;
  for (int i = 0; i < waiters; ++i) {
    locks.push_back(std::make_unique<zk::simple_lock>(zk, path));
    asio::co_spawn(ex, simple_worker(*locks.back(), done), asio::detached);
  }
  // Each waiter's create fails (taken) and its read of the owner arms the
  // watch: two replies. Wait for all of them, however slow the host is.
  co_await wait_for_replies(zk, replies_before + 2 * static_cast<std::uint64_t>(waiters));
  auto events_before = zk.stats().watch_events_delivered;
  co_await holder.release();
  while (*done < waiters) co_await sleep_for(5ms);
  auto events = zk.stats().watch_events_delivered - events_before;
  BOOST_TEST_MESSAGE("simple lock: " << events << " watch events for " << waiters << " handoffs");
  // The herd: a release wakes every waiter still waiting, far more than one each.
  BOOST_TEST(events > static_cast<std::uint64_t>(2 * waiters));
  co_await zk.close();
  co_await holder_zk.close();
}

BOOST_AUTO_TEST_CASE(simple_lock_wakes_the_herd) {
  asio::io_context io;
  run_coroutine(io, simple_lock_herd(50));
}

// --- try, timeouts and cancellation ---

asio::awaitable<void> try_and_timeouts() {
  auto ex = co_await asio::this_coro::executor;
  zk::client zk(ex, options());
  co_await zk.connect();
  auto path = lock_path("try");
  zk::mutex holder(zk, path), other(zk, path);
  co_await holder.try_acquire();
  BOOST_TEST(holder.held());
  auto [taken] = co_await other.try_acquire(asio::as_tuple(asio::deferred));
  BOOST_TEST(taken == make_error_code(dlock::error::taken));
  BOOST_TEST((co_await children_of(zk, path)).size() == 1u);

  auto [timed_out] = co_await other.acquire_for(100ms, asio::as_tuple(asio::deferred));
  BOOST_TEST(timed_out == make_error_code(dlock::error::timed_out));
  BOOST_TEST((co_await children_of(zk, path)).size() == 1u);

  // A parallel group: the timer wins, the acquire is cancelled and cleans up.
  asio::steady_timer timer(ex, 50ms);
  auto [order, acquire_ec, timer_ec] =
      co_await asio::experimental::make_parallel_group(other.acquire(asio::deferred), timer.async_wait(asio::deferred))
          .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
  BOOST_TEST(order[0] == 1u);
  BOOST_TEST(acquire_ec == make_error_code(asio::error::operation_aborted));
  BOOST_TEST((co_await children_of(zk, path)).size() == 1u);

  // Partial cancellation through a bound slot.
  asio::cancellation_signal signal;
  auto partial = other.acquire(asio::bind_cancellation_slot(signal.slot(), asio::as_tuple(asio::use_awaitable)));
  asio::steady_timer later(ex, 30ms);
  later.async_wait([&](error_code) { signal.emit(asio::cancellation_type::partial); });
  auto [partial_ec] = co_await std::move(partial);
  BOOST_TEST(partial_ec == make_error_code(asio::error::operation_aborted));
  BOOST_TEST((co_await children_of(zk, path)).size() == 1u);

  // The lock still works for the cancelled object afterwards.
  co_await holder.release();
  co_await other.acquire();
  BOOST_TEST(other.held());
  co_await other.release();
  co_await zk.close();
}

BOOST_AUTO_TEST_CASE(try_acquire_timeouts_and_group_cancellation_leave_no_node) {
  asio::io_context io;
  run_coroutine(io, try_and_timeouts());
}

asio::awaitable<void> acquire_in_coroutine(zk::mutex& m) { co_await m.acquire(); }

struct cancel_log {
  std::vector<std::string> acquired_nodes;
  int aborted = 0;
  int finished = 0;
};

asio::awaitable<void> cancellable_waiter(zk::mutex& m, std::shared_ptr<cancel_log> log, asio::cancellation_slot slot) {
  auto [ec] = co_await m.acquire(asio::bind_cancellation_slot(slot, asio::as_tuple(asio::use_awaitable)));
  if (ec) {
    BOOST_TEST(ec == make_error_code(asio::error::operation_aborted));
    ++log->aborted;
  } else {
    log->acquired_nodes.push_back(basename(m.node_path()));
    co_await m.release();
  }
  ++log->finished;
}

asio::awaitable<void> cancel_100_waiters() {
  auto ex = co_await asio::this_coro::executor;
  zk::client holder_zk(ex, options());
  zk::client zk(ex, options());
  co_await holder_zk.connect();
  co_await zk.connect();
  auto path = lock_path("cancel");
  zk::mutex holder(holder_zk, path);
  co_await holder.acquire();

  constexpr int total = 130, cancelled = 100;
  std::vector<std::unique_ptr<zk::mutex>> mutexes;
  std::vector<std::unique_ptr<asio::cancellation_signal>> signals;
  auto log = std::make_shared<cancel_log>();
  std::mt19937 random(std::random_device{}());
  std::vector<int> victims(total);
  for (int i = 0; i < total; ++i) victims[i] = i;
  std::shuffle(victims.begin(), victims.end(), random);
  victims.resize(cancelled);
  std::sort(victims.begin(), victims.end());

  for (int i = 0; i < total; ++i) {
    mutexes.push_back(std::make_unique<zk::mutex>(zk, path));
    signals.push_back(std::make_unique<asio::cancellation_signal>());
    asio::co_spawn(ex, cancellable_waiter(*mutexes.back(), log, signals.back()->slot()), asio::detached);
  }
  // Cancel at random points: a third at once (before any create reply), the
  // rest after random delays (some before, some after their node exists).
  std::vector<std::unique_ptr<asio::steady_timer>> timers;
  for (std::size_t k = 0; k < victims.size(); ++k) {
    auto* signal = signals[victims[k]].get();
    if (k % 3 == 0) {
      asio::post(ex, [signal] { signal->emit(asio::cancellation_type::terminal); });
    } else {
      timers.push_back(std::make_unique<asio::steady_timer>(ex, std::chrono::milliseconds(random() % 40)));
      timers.back()->async_wait([signal](error_code) { signal->emit(asio::cancellation_type::terminal); });
    }
  }
  while (log->aborted < cancelled) co_await sleep_for(5ms);
  for (int i = 0; i < total; ++i)
    if (!std::binary_search(victims.begin(), victims.end(), i)) co_await wait_for_node(*mutexes[i]);

  // Only the holder's node and the survivors' remain.
  auto children = co_await children_of(zk, path);
  BOOST_TEST(children.size() == static_cast<std::size_t>(1 + total - cancelled));
  BOOST_TEST(children.front() == basename(holder.node_path()));
  std::vector<std::string> expected(children.begin() + 1, children.end());

  co_await holder.release();
  while (log->finished < total) co_await sleep_for(5ms);
  BOOST_TEST(log->acquired_nodes == expected, "the remaining waiters acquire in order");
  BOOST_TEST((co_await children_of(zk, path)).empty());
  co_await zk.close();
  co_await holder_zk.close();
}

BOOST_AUTO_TEST_CASE(cancel_100_waiters_at_random_points) {
  asio::io_context io;
  run_coroutine(io, cancel_100_waiters());
}

asio::awaitable<void> co_spawn_cancellation() {
  auto ex = co_await asio::this_coro::executor;
  zk::client zk(ex, options());
  co_await zk.connect();
  auto path = lock_path("spawn");
  zk::mutex holder(zk, path), other(zk, path);
  co_await holder.acquire();
  asio::cancellation_signal signal;
  bool finished = false;
  std::exception_ptr failure;
  asio::co_spawn(ex, acquire_in_coroutine(other),
                 asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e) {
                   failure = e;
                   finished = true;
                 }));
  co_await wait_for_node(other);
  signal.emit(asio::cancellation_type::terminal);
  while (!finished) co_await sleep_for(1ms);
  BOOST_TEST(static_cast<bool>(failure));
  BOOST_TEST((co_await children_of(zk, path)).size() == 1u);
  co_await holder.release();
  co_await zk.close();
}

BOOST_AUTO_TEST_CASE(co_spawn_cancellation_deletes_the_node) {
  asio::io_context io;
  run_coroutine(io, co_spawn_cancellation());
}

// --- shared lock ---

asio::awaitable<void> shared_lock() {
  auto ex = co_await asio::this_coro::executor;
  zk::client zk(ex, options());
  co_await zk.connect();
  auto path = lock_path("rw");
  std::vector<std::unique_ptr<zk::shared_mutex>> rw;
  for (int i = 0; i < 6; ++i) rw.push_back(std::make_unique<zk::shared_mutex>(zk, path));

  // Many readers hold together.
  for (int i = 0; i < 3; ++i) co_await rw[i]->reader().try_acquire();
  auto names = co_await children_of(zk, path);
  BOOST_REQUIRE(names.size() == 3u);
  for (auto& n : names) BOOST_TEST(n.substr(39, 9) == "-__READ__");

  // A writer waits for them; readers who come later queue behind the writer.
  auto [wtaken] = co_await rw[3]->writer().try_acquire(asio::as_tuple(asio::deferred));
  BOOST_TEST(wtaken == make_error_code(dlock::error::taken));
  bool writer_in = false, late_reader_in = false;
  asio::co_spawn(ex, acquire_in_coroutine(rw[3]->writer()), [&](std::exception_ptr) { writer_in = true; });
  co_await wait_for_node(rw[3]->writer());
  asio::co_spawn(ex, acquire_in_coroutine(rw[4]->reader()), [&](std::exception_ptr) { late_reader_in = true; });
  co_await wait_for_node(rw[4]->reader());
  co_await sleep_for(100ms);
  BOOST_TEST(!writer_in);
  BOOST_TEST(!late_reader_in, "a later reader does not pass the waiting writer");

  for (int i = 0; i < 3; ++i) co_await rw[i]->reader().release();
  while (!writer_in) co_await sleep_for(1ms);
  BOOST_TEST(rw[3]->writer().held());
  auto [rtaken] = co_await rw[5]->reader().try_acquire(asio::as_tuple(asio::deferred));
  BOOST_TEST(rtaken == make_error_code(dlock::error::taken), "a writer excludes readers");
  co_await sleep_for(50ms);
  BOOST_TEST(!late_reader_in);
  co_await rw[3]->writer().release();
  while (!late_reader_in) co_await sleep_for(1ms);
  BOOST_TEST(rw[4]->reader().held());
  co_await rw[4]->reader().release();
  BOOST_TEST((co_await children_of(zk, path)).empty());
  co_await zk.close();
}

BOOST_AUTO_TEST_CASE(shared_mutex_readers_together_writer_alone_no_starvation) {
  asio::io_context io;
  run_coroutine(io, shared_lock());
}

// --- with_lock ---

asio::awaitable<int> counted_body(zk::mutex& m, int* runs) {
  BOOST_TEST(m.held());
  ++*runs;
  co_return 42;
}

asio::awaitable<void> failing_body(zk::mutex& m) {
  BOOST_TEST(m.held());
  throw std::runtime_error("body failed");
  co_return;
}

asio::awaitable<void> scoped() {
  auto ex = co_await asio::this_coro::executor;
  zk::client zk(ex, options());
  co_await zk.connect();
  auto path = lock_path("scoped");
  zk::mutex m(zk, path);
  int runs = 0;
  int value = co_await dlock::with_lock(m, [&] { return counted_body(m, &runs); });
  BOOST_TEST(value == 42);
  BOOST_TEST(runs == 1);
  BOOST_TEST(!m.held());
  bool threw = false;
  try {
    co_await dlock::with_lock(m, [&] { return failing_body(m); });
  } catch (const std::runtime_error&) {
    threw = true;
  }
  BOOST_TEST(threw);
  BOOST_TEST(!m.held());
  BOOST_TEST((co_await children_of(zk, path)).empty());
  co_await zk.close();
}

BOOST_AUTO_TEST_CASE(with_lock_releases_on_every_path) {
  asio::io_context io;
  run_coroutine(io, scoped());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
