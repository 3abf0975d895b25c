// Every ```cpp block of README.md, verbatim, inside a function that gives it
// the context the README assumes (a connected client `zk`, a mutex `m`, ...).
// Compiling this file is the test: the snippets cannot rot. The functions are
// never run (they would need servers); test/readme_snippets_check.py checks
// that each README block still appears here, so the two cannot drift apart.
// When you change a README snippet, paste the new version here.
#include <dlock/error.hpp>
#include <dlock/log.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/fenced.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/redis/semaphore.hpp>
#include <dlock/with_lock.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/leader_election.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/queue.hpp>
#include <dlock/zk/semaphore.hpp>
#include <dlock/zk/shared_mutex.hpp>
#include <dlock/zk/simple_lock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace asio = boost::asio;

// External linkage: never called, but no "unused function" warnings either.
namespace readme {

// What the snippets call but do not define.
asio::awaitable<void> write_orders(std::int64_t fencing_token) {
  (void)fencing_token;
  co_return;
}
asio::awaitable<void> copy_files() { co_return; }

// ---- Quick start

asio::awaitable<void> zookeeper_session() {
  dlock::zk::options options;
  options.hosts = "127.0.0.1:2181";                 // "host:port,...[/chroot]"
  options.session_timeout = std::chrono::seconds(10);
  dlock::zk::client zk(co_await asio::this_coro::executor, options);
  co_await zk.connect();
  auto made = co_await zk.create("/app/node", "data", dlock::zk::create_mode::ephemeral);
  auto [data, stat] = co_await zk.get("/app/node");
  dlock::zk::watch w;
  co_await zk.exists("/app/other", w);              // arm a one-shot watch...
  auto event = co_await w.wait();                   // ...and await its event later
  (void)made;
  (void)data;
  (void)stat;
  (void)event;
}

asio::awaitable<void> fencing(dlock::redis::connection& conn, dlock::zk::client& zk, dlock::zk::mutex& m) {
  dlock::redis::lock l(conn, "orders-lock", {.fencing = true});
  co_await l.acquire();
  co_await dlock::redis::fenced_set(conn, "orders", "v2", l.fencing_token());
  // throws dlock::error::stale_token if a later holder of "orders-lock" has written "orders"

  co_await m.acquire();                             // a dlock::zk::mutex
  std::vector<dlock::zk::op> write{m.ownership_check(), dlock::zk::op::set("/orders", "v2")};
  co_await zk.multi(write);
  // throws zk::error::no_node, writing nothing, once m's session has ended
}

asio::awaitable<void> zookeeper_mutex(dlock::zk::client& zk) {
  dlock::zk::mutex m(zk, "/locks/orders");
  co_await m.acquire();                             // or try_acquire(), acquire_for(5s)
  auto token = m.fencing_token();                   // pass it to the storage you write to
  // ... critical section ...
  co_await m.release();
  (void)token;
}

asio::awaitable<void> shared_and_simple(dlock::zk::client& zk) {
  dlock::zk::shared_mutex catalog(zk, "/locks/catalog");
  co_await catalog.reader().acquire();              // many readers at once...
  co_await catalog.reader().release();
  co_await catalog.writer().acquire();              // ...or one writer
  co_await catalog.writer().release();
  dlock::zk::simple_lock once(zk, "/locks/nightly-job");
  co_await once.try_acquire();                      // one ephemeral node: throws dlock::error::taken if it exists
}

asio::awaitable<void> scoped(dlock::zk::mutex& m) {
  auto body = [&] { return write_orders(m.fencing_token()); };  // write_orders: a coroutine
  co_await dlock::with_lock(m, body);               // body cancelled if the lock is lost
}

asio::awaitable<void> election(dlock::zk::client& zk) {
  dlock::zk::leader_election election(zk, "/election/billing");
  co_await election.campaign("worker-7");           // returns once this candidate leads
  // ... lead, until election.loss() fires or you resign ...
  co_await election.resign();
  std::optional<std::string> leader = co_await election.leader();
  auto next = co_await election.observe(leader);   // completes at the next change
  (void)next;
}

asio::awaitable<void> queue(dlock::zk::client& zk) {
  dlock::zk::queue q(zk, "/queues/jobs");
  co_await q.offer("job-1");
  std::string job = co_await q.take();              // waits for an item (one watch, no polling)
  std::optional<std::string> maybe = co_await q.poll();
  auto [ec, next] = co_await q.take_for(std::chrono::seconds(5), asio::as_tuple(asio::deferred));
  if (ec == dlock::error::timed_out) { /* nothing was taken */ }
  (void)job;
  (void)maybe;
  (void)next;
}

asio::awaitable<void> queue_claims(dlock::zk::client& zk) {
  dlock::zk::queue q(zk, "/queues/payments");
  dlock::zk::claimed_item payment = co_await q.take_claimed();
  // ... process payment.data ...
  co_await q.ack(payment);                          // or q.release(payment) to give it back
}

asio::awaitable<void> redis_connection() {
  dlock::redis::options ro;
  ro.host = "127.0.0.1";
  ro.port = 6379;
  dlock::redis::connection conn(co_await asio::this_coro::executor, ro);
  co_await conn.connect();
  dlock::redis::reply pong = co_await conn.exec(dlock::redis::command("PING"));
  (void)pong;
}

asio::awaitable<void> redis_lock(dlock::redis::connection& conn) {
  dlock::redis::lock l(conn, "orders", {.ttl = std::chrono::seconds(10)});
  co_await l.acquire();                             // SET orders <token> NX PX 10000, with retries
  co_await l.release();                             // compare-and-delete (Lua)
}

asio::awaitable<void> zk_semaphore(dlock::zk::client& zk) {
  dlock::zk::semaphore pool(zk, "/semaphores/encoders", 4);
  co_await pool.acquire(2);                         // two of the 4 leases, all or none
  co_await pool.release(1);                         // give one back
  co_await pool.release();                          // and the rest
}

asio::awaitable<void> redis_semaphore(dlock::redis::connection& conn) {
  dlock::redis::semaphore lease(conn, "encoders", 4, {.ttl = std::chrono::seconds(10), .auto_extend = true});
  co_await lease.acquire();                         // one of 4 leases; retries while all are held
  co_await lease.release();                         // removes our member, nobody else's
}

asio::awaitable<void> redlock() {
  std::vector<std::shared_ptr<dlock::redis::connection>> masters;   // one per master, connected
  dlock::redis::redlock rl(co_await asio::this_coro::executor, masters, "orders",
                           {.ttl = std::chrono::seconds(10), .auto_extend = true});
  co_await rl.acquire();                            // SET NX to all masters at once; a majority wins
  auto left = rl.validity();                        // ttl - elapsed - drift
  co_await rl.release();                            // compare-and-delete on all masters
  (void)left;
}

// ---- Completion tokens, cancellation and timeouts

asio::awaitable<void> tokens(dlock::zk::mutex& m) {
  auto [ec] = co_await m.try_acquire(asio::as_tuple(asio::deferred));   // no exception
  if (ec == dlock::error::taken) { /* someone else holds it */ }
  m.release([](dlock::error_code released) {        // a plain callback
    if (released) std::fprintf(stderr, "release: %s\n", released.message().c_str());
  });
}

asio::awaitable<void> timeout_acquire_for(dlock::zk::mutex& m) {
  // 1. The lock's own limit (every lock): dlock::error::timed_out, nothing left behind.
  auto [ec] = co_await m.acquire_for(std::chrono::seconds(5), asio::as_tuple(asio::deferred));
  (void)ec;
}

asio::awaitable<void> timeout_signal(dlock::zk::mutex& m) {
  // 2. Any operation: a timer emits on a cancellation signal bound to the operation.
  asio::cancellation_signal stop;
  asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::seconds(5));
  timer.async_wait([&stop](dlock::error_code ec) {
    if (!ec) stop.emit(asio::cancellation_type::terminal);
  });
  auto [ec] = co_await m.acquire(asio::bind_cancellation_slot(stop.slot(), asio::as_tuple(asio::use_awaitable)));
  timer.cancel();                                   // ec == asio::error::operation_aborted if the timer won
  (void)ec;
}

asio::awaitable<void> timeout_operators(dlock::zk::mutex& m) {
  // 3. Awaitable operators: whichever finishes first cancels the other.
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::seconds(5));
  auto winner = co_await (m.acquire(asio::use_awaitable) || timer.async_wait(asio::use_awaitable));
  if (winner.index() == 1) { /* timed out: the acquire was cancelled */ }
}

// ---- Error handling

asio::awaitable<void> errors(dlock::zk::mutex& m) {
  try {
    co_await m.try_acquire();
  } catch (const boost::system::system_error& e) {
    if (e.code() == dlock::error::taken) { /* busy: try later */ }
    else if (e.code() == dlock::zk::error::session_expired) { /* the session ended while acquiring */ }
    else throw;
  }
}

// ---- Lock loss

asio::awaitable<void> loss_signal(dlock::zk::mutex& m) {
  co_await m.acquire();
  asio::cancellation_signal on_loss;
  m.loss().bind(on_loss);                           // the loss emits on on_loss (until release)
  asio::steady_timer work(co_await asio::this_coro::executor, std::chrono::seconds(30));
  auto [ec] = co_await work.async_wait(asio::bind_cancellation_slot(on_loss.slot(), asio::as_tuple(asio::use_awaitable)));
  if (m.loss().lost()) { /* ec is operation_aborted; why: m.loss().reason() */ }
  co_await m.release(asio::as_tuple(asio::deferred)); // after a loss: the reason as error, node cleaned up
  (void)ec;
}

asio::awaitable<void> loss_race(dlock::zk::mutex& m) {
  using namespace asio::experimental::awaitable_operators;
  co_await m.acquire();
  auto first = co_await (copy_files() || m.loss().wait(asio::use_awaitable));   // copy_files: a coroutine
  if (first.index() == 1) { /* the lock was lost: copy_files was cancelled */ }
  co_await m.release();
}

// ---- Configuration

asio::awaitable<void> configuration(dlock::zk::client& zk) {
  dlock::zk::lock_options lo;
  lo.identifier = "billing-7";                      // what participants() shows for us
  lo.policy = dlock::zk::loss_policy::session;      // keep the lock across short disconnections
  dlock::zk::mutex invoices(zk, "/locks/invoices", lo);
  co_return;
}

// ---- Logging

void logging() {
  dlock::set_log_handler([](dlock::log_level level, std::string_view message) {
    std::clog << dlock::to_string(level) << ": " << message << '\n';
  }, dlock::log_level::info);
}

}  // namespace readme

BOOST_AUTO_TEST_CASE(readme_snippets_compile) {
  // Reaching here means they compiled; taking an address keeps the linker honest.
  BOOST_TEST(&readme::zookeeper_session != nullptr);
  BOOST_TEST(&readme::logging != nullptr);
}
