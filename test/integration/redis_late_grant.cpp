// Issue #31, reproduction 1: time passing inside the client. A holder's
// io_context is blocked (a GC-like pause, a long handler) right after its
// acquire's SET went out, for longer than the ttl. Meanwhile the key
// expires and a rival takes it. The first acquire's yes, read after the
// pause, must not become a hold: `expired`, never held, and the rival's key
// untouched. Before the fix every kind completed with success (two holders).
// Also: a ttl that the drift allowance eats whole is refused at once.
#include "redis_support.hpp"

#include "common/redis_proxy.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/semaphore.hpp>
#include <dlock/stall_monitor.hpp>
#include <dlock/with_lock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using dlock::error_code;
using namespace std::chrono_literals;
using dlock::test::redis_proxy;
using redis_test::master_options;

namespace {

constexpr auto tuple_token = asio::as_tuple(asio::deferred);
constexpr auto ttl = 300ms;

enum class kind { lock, fenced_lock, semaphore };

redis::lock_options lock_options(bool fencing) {
  redis::lock_options o;
  o.ttl = ttl;
  o.fencing = fencing;
  return o;
}

redis::semaphore_options semaphore_options() {
  redis::semaphore_options o;
  o.ttl = ttl;
  return o;
}

asio::awaitable<long long> exists(redis::connection& c, std::string key) {
  auto [ec, r] = co_await c.exec(redis::command("EXISTS", key), tuple_token);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  co_return r.integer();
}

template <class Lock>
asio::awaitable<error_code> try_acquire(Lock& l) {
  auto [ec] = co_await l.try_acquire(tuple_token);
  co_return ec;
}

template <class Lock>
asio::awaitable<error_code> release(Lock& l) {
  auto [ec] = co_await l.release(tuple_token);
  co_return ec;
}

// The rival, on an io_context of its own, run from inside the holder's
// pause: once the holder's SET is on the server and its ttl ran out, it
// takes the key, and keeps it (released by `release_rival`).
struct rival {
  asio::io_context io;
  std::optional<redis::connection> conn;
  std::optional<redis::lock> lock;
  std::optional<redis::semaphore> semaphore;
  error_code taken = dlock::error::not_held;
  bool saw_the_holders_key = false;
};

asio::awaitable<void> take_over(rival* r, kind what, std::string key) {
  r->conn.emplace(r->io.get_executor(), master_options());
  co_await r->conn->connect(asio::use_awaitable);
  // The holder's SET was written before its pause began: wait for it.
  for (int i = 0; i < 400 && !r->saw_the_holders_key; ++i) {
    r->saw_the_holders_key = co_await exists(*r->conn, key) == 1;
    if (!r->saw_the_holders_key) std::this_thread::sleep_for(5ms);
  }
  std::this_thread::sleep_for(ttl + 100ms);  // the holder's key expires on the server
  // The rival keeps the key well past the holder's late reply.
  if (what == kind::semaphore) {
    auto o = semaphore_options();
    o.ttl = 10s;
    r->semaphore.emplace(*r->conn, key, 1, o);
    r->taken = co_await try_acquire(*r->semaphore);
  } else {
    auto o = lock_options(what == kind::fenced_lock);
    o.ttl = 10s;
    r->lock.emplace(*r->conn, key, o);
    r->taken = co_await try_acquire(*r->lock);
  }
  r->io.stop();  // the connection's read would keep run() going
}

// Blocks the holder's io_context: the pause, with the rival inside it (on
// a thread of its own, as another process would be).
void pause_with_rival(rival* r, kind what, std::string key) {
  std::exception_ptr failure;
  asio::co_spawn(r->io, take_over(r, what, std::move(key)), [&failure](std::exception_ptr e) { failure = e; });
  std::thread other([r] { r->io.run(); });
  other.join();
  r->io.restart();
  if (failure) std::rethrow_exception(failure);
  std::this_thread::sleep_for(200ms);  // the pause goes on a little after the rival took over
}

asio::awaitable<void> release_rival(rival* r) {
  if (r->lock) BOOST_CHECK(!co_await release(*r->lock));
  if (r->semaphore) BOOST_CHECK(!co_await release(*r->semaphore));
  r->io.stop();
}

void release_rival_now(rival& r) {
  std::exception_ptr failure;
  asio::co_spawn(r.io, release_rival(&r), [&failure](std::exception_ptr e) { failure = e; });
  std::thread other([&r] { r.io.run(); });
  other.join();
  if (failure) std::rethrow_exception(failure);
}

// The holder reaches the master through a proxy, which blocks the holder's
// io_context (with the rival inside the pause) once the acquire's command
// went out, before its reply can be read.
redis::options through(const redis_proxy& proxy) {
  auto o = master_options();
  o.host = proxy.host();
  o.port = proxy.port();
  o.command_timeout = 10s;  // the reply comes late, but it comes
  return o;
}

void arm_pause(redis_proxy& proxy, asio::any_io_executor ex, rival* r, kind what, std::string key) {
  proxy.run_in_client(ex, [r, what, key] { pause_with_rival(r, what, key); });
}

// The semaphore's script is loaded before the proxy counts: its acquire is then one EVALSHA.
asio::awaitable<void> load_scripts(redis::connection& c) {
  redis::semaphore warm(c, dlock::test::unique_name("late-grant-warm"), 1, semaphore_options());
  BOOST_REQUIRE(!co_await try_acquire(warm));
  BOOST_REQUIRE(!co_await release(warm));
}

template <class Lock>
asio::awaitable<void> holder(asio::any_io_executor ex, kind what, std::shared_ptr<dlock::stall_monitor> monitor,
                             rival* r) {
  redis_proxy proxy(master_options().host, master_options().port);
  auto options = through(proxy);
  options.stall = std::move(monitor);
  redis::connection c(ex, options);
  co_await c.connect(asio::use_awaitable);
  co_await load_scripts(c);
  auto key = dlock::test::unique_name("late-grant");
  std::optional<Lock> l;
  if constexpr (std::is_same_v<Lock, redis::semaphore>) l.emplace(c, key, 1, semaphore_options());
  else l.emplace(c, key, lock_options(what == kind::fenced_lock));
  arm_pause(proxy, ex, r, what, key);
  auto [ec] = co_await l->try_acquire(tuple_token);
  BOOST_TEST_REQUIRE(r->saw_the_holders_key);
  BOOST_TEST_REQUIRE(!r->taken, "the rival took the expired key: " << r->taken.message());
  BOOST_TEST_MESSAGE("the holder's acquire, decided after its ttl: " << ec.message());
  BOOST_TEST((ec == dlock::error::expired));
  BOOST_TEST(!l->held());
  BOOST_TEST(l->validity().count() == 0);
  // The expired attempt's cleanup deletes by its own token: the rival's key stays.
  asio::steady_timer settle(ex, 100ms);
  co_await settle.async_wait(tuple_token);
  BOOST_TEST(co_await exists(c, key) == 1);
  c.close();
}

template <class Lock>
void run_holder(kind what, bool with_monitor) {
  asio::io_context io;
  rival r;
  std::shared_ptr<dlock::stall_monitor> monitor;
  if (with_monitor) monitor = std::make_shared<dlock::stall_monitor>(io.get_executor());
  auto body = holder<Lock>(io.get_executor(), what, monitor, &r);
  bool done = false;
  asio::co_spawn(io, std::move(body), [&](std::exception_ptr e) {
    done = true;
    monitor.reset();  // its timer would keep io.run() going
    if (e) std::rethrow_exception(e);
  });
  io.run();
  BOOST_REQUIRE(done);
  release_rival_now(r);
}

// with_lock: the body never starts when the acquire was decided too late.
asio::awaitable<void> count_the_body(int* runs) {
  ++*runs;
  co_return;
}

asio::awaitable<void> with_lock_holder(asio::any_io_executor ex, rival* r) {
  redis_proxy proxy(master_options().host, master_options().port);
  redis::connection c(ex, through(proxy));
  co_await c.connect(asio::use_awaitable);
  auto key = dlock::test::unique_name("late-grant-with-lock");
  redis::lock l(c, key, lock_options(false));
  int runs = 0;
  auto body = [&runs] { return count_the_body(&runs); };
  arm_pause(proxy, ex, r, kind::lock, key);
  auto [e] = co_await dlock::with_lock(l, body, tuple_token);
  BOOST_TEST_REQUIRE(!r->taken);
  BOOST_TEST(runs == 0);
  BOOST_REQUIRE(e);
  try {
    std::rethrow_exception(e);
  } catch (const boost::system::system_error& failure) {
    BOOST_TEST((failure.code() == dlock::error::expired), failure.what());
  }
  c.close();
}

asio::awaitable<void> ttl_inside_the_drift_is_refused(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect(asio::use_awaitable);
  auto key = dlock::test::unique_name("drift-ttl");
  for (auto t : {1ms, 2ms}) {  // the default allowance: ttl * 1 % + 2 ms
    auto o = lock_options(false);
    o.ttl = t;
    redis::lock tiny(c, key, o);
    BOOST_TEST((co_await try_acquire(tiny) == dlock::error::invalid_argument));
    redis::semaphore_options so;
    so.ttl = t;
    redis::semaphore s(c, key, 1, so);
    BOOST_TEST((co_await try_acquire(s) == dlock::error::invalid_argument));
  }
  BOOST_TEST(co_await exists(c, key) == 0);
  auto o = lock_options(false);
  o.ttl = 3ms;  // one millisecond more than the allowance: accepted (and soon expired)
  redis::lock smallest(c, key, o);
  auto ec = co_await try_acquire(smallest);
  BOOST_TEST((!ec || ec == dlock::error::expired), ec.message());
}

// held() is never true with validity() at zero: the loop blocked past the
// ttl right after the grant, so the validity watch has not run yet (and the
// loss has not fired) when held() is read. Before, held() was still true.
template <class Lock>
asio::awaitable<void> held_ends_with_the_validity(Lock& l) {
  BOOST_REQUIRE(!co_await try_acquire(l));
  BOOST_TEST(l.held());
  std::this_thread::sleep_for(ttl + 20ms);  // the loop blocked: no handler runs
  BOOST_TEST(l.validity() == 0ms);
  BOOST_TEST(!l.held());
  BOOST_TEST(!l.loss().lost());
  asio::steady_timer wait(co_await asio::this_coro::executor, 50ms);
  co_await wait.async_wait(asio::deferred);
  BOOST_TEST(l.loss().lost());  // then told, as before
  BOOST_TEST(!l.held());
}

asio::awaitable<void> held_ends_with_the_validity_of_each(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect(asio::use_awaitable);
  redis::lock l(c, dlock::test::unique_name("held-validity-lock"), lock_options(false));
  co_await held_ends_with_the_validity(l);
  redis::semaphore s(c, dlock::test::unique_name("held-validity-semaphore"), 2, semaphore_options());
  co_await held_ends_with_the_validity(s);
  c.close();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_late_grant)

BOOST_AUTO_TEST_CASE(held_is_never_true_once_the_validity_ran_out) {
  redis_test::run(&held_ends_with_the_validity_of_each);
}

BOOST_AUTO_TEST_CASE(a_lock_decided_after_its_ttl_is_expired_not_held) {
  run_holder<redis::lock>(kind::lock, false);
}
BOOST_AUTO_TEST_CASE(a_fenced_lock_decided_after_its_ttl_is_expired_not_held) {
  run_holder<redis::lock>(kind::fenced_lock, false);
}
BOOST_AUTO_TEST_CASE(a_semaphore_lease_decided_after_its_ttl_is_expired_not_held) {
  run_holder<redis::semaphore>(kind::semaphore, false);
}
BOOST_AUTO_TEST_CASE(a_lock_with_a_stall_monitor_decided_after_its_ttl_is_expired_not_held) {
  run_holder<redis::lock>(kind::lock, true);
}
BOOST_AUTO_TEST_CASE(with_lock_never_runs_its_body_on_a_grant_decided_after_its_ttl) {
  asio::io_context io;
  rival r;
  redis_test::run(io, with_lock_holder(io.get_executor(), &r));
  release_rival_now(r);
}
BOOST_AUTO_TEST_CASE(a_ttl_inside_the_drift_allowance_is_refused_at_once) {
  redis_test::run(&ttl_inside_the_drift_is_refused);
}

BOOST_AUTO_TEST_SUITE_END()
