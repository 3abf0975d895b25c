// Fault injection at every step of the Redis recipes (safety issue: "fault
// injection at every step"): redis::lock (plain and fenced), redis::semaphore
// (one lease) and redis::redlock. Each scenario (acquire, extend, release) runs
// once through redis_proxy to count its commands, then once per command k
// with a fault at command k:
//   cut      the command is forwarded, the connection cut before its reply;
//   drop     the command is forwarded, its reply swallowed, the connection
//            kept (the client's command timeout fires);
//   delay    the replies from command k on are held past the command timeout
//            (and past Redlock's per-master timeout);
//   refuse   the connection is cut after command k and new connections are
//            reset for a while;
//   expire   the replies from command k on are held past the TTL (the lease
//            ends while the client waits: Redis's counterpart of a session
//            expiry);
//   pause    the client's own io_context is blocked for a while once
//            command k went out (a GC-like pause, a long handler), shorter
//            than the TTL;
//   stall    the same, longer than the TTL: the reply is read after the
//            key expired on the server (issue #31: time inside the client);
//   oom, readonly, busy
//            command k is refused with that error (a master at its memory
//            limit, a demoted master, a script running): nothing ran;
//   script_error
//            command k ran, then its reply is an error (a script that failed
//            after its first write).
// For Redlock the same fault hits a majority of the masters (three of five)
// at their command k; the errors a minority (two of five), as a fleet meets
// them. After each operation a direct connection checks the
// invariants: at most one holder (a second lock's try_acquire is refused
// while we hold); held() only if the server has our token; no key holding our
// token once the operation completed (or, for a key a failed operation may
// have left, once its TTL has passed); a truthful error.
//
// Only proxies, no server kills: an integration test, running with the others.
#include "common/redis_proxy.hpp"
#include "common/servers.hpp"
#include "common/step_faults.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/error.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/redis/semaphore.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using dlock::error_code;
using dlock::test::redis_proxy;
using dlock::test::step_outcome;
using namespace std::chrono_literals;

namespace {

constexpr auto with_ec = asio::as_tuple(asio::deferred);

constexpr auto ttl = 1500ms;
constexpr auto command_timeout = 300ms;
constexpr auto master_timeout = 200ms;
constexpr auto held_reply = 600ms;       // past both timeouts above
constexpr auto refused_for = 1000ms;

constexpr auto short_pause = 500ms;      // less than the TTL
constexpr auto long_pause = ttl + 300ms;  // more than the TTL

enum class fault { cut, drop, delay, refuse, expire, pause, stall, oom, readonly, busy, script_error };
const std::vector<std::string> fault_names = {"cut",   "drop", "delay",    "refuse", "expire",      "pause",
                                              "stall", "oom",  "readonly", "busy",   "script_error"};

bool is_error_fault(fault f) {
  return f == fault::oom || f == fault::readonly || f == fault::busy || f == fault::script_error;
}

struct plan {
  int step = 0;  // 0: no fault
  fault kind = fault::cut;
};

struct run_result {
  int steps = 0;
  bool fired = false;
};

void arm(redis_proxy& proxy, const plan& p, asio::any_io_executor client) {
  if (p.step == 0) return;
  switch (p.kind) {
    case fault::cut: proxy.cut_after(20ms, p.step); break;
    case fault::drop: proxy.drop_reply(p.step); break;
    case fault::delay: proxy.hold_replies(held_reply, p.step); break;
    case fault::refuse: proxy.cut_after(20ms, p.step); break;  // refuse_when_fired does the rest
    case fault::expire: proxy.hold_replies(ttl + 300ms, p.step); break;
    case fault::pause: proxy.pause_client(client, short_pause, p.step); break;
    case fault::stall: proxy.pause_client(client, long_pause, p.step); break;
    case fault::oom: proxy.answer_error("OOM command not allowed when used memory > 'maxmemory'.", false, p.step); break;
    case fault::readonly: proxy.answer_error("READONLY You can't write against a read only replica.", false, p.step); break;
    case fault::busy:
      proxy.answer_error("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.",
                         false, p.step);
      break;
    case fault::script_error:
      proxy.answer_error("ERR user_script:1: Script attempted to access nonexistent global variable 'x'", true, p.step);
      break;
  }
}

// The errors a refused or failed command may truthfully report.
bool is_server_error(const error_code& ec) {
  return ec == redis::error::server_error || ec == redis::error::busy || ec == redis::error::read_only;
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(with_ec);
}

// `checker`: the direct connections the checks use get a long command
// timeout, so that a loaded machine cannot fail a check.
redis::options options_for(const std::string& host, std::uint16_t port, bool checker = false) {
  redis::options o;
  o.host = host;
  o.port = port;
  o.command_timeout = checker ? 5000ms : command_timeout;
  o.connect_timeout = 1000ms;
  o.reconnect_min = 20ms;
  o.reconnect_max = 100ms;
  return o;
}

// The refuse fault: once the cut fired, refuse reconnections for a while.
asio::awaitable<void> refuse_when_fired(std::vector<redis_proxy*> proxies, std::vector<int> faults_before,
                                        std::shared_ptr<bool> stop, std::shared_ptr<bool> done) {
  std::vector<bool> refused(proxies.size(), false);
  for (;;) {
    bool all = true;
    for (std::size_t i = 0; i < proxies.size(); ++i) {
      if (!refused[i] && proxies[i]->faults() > faults_before[i]) {
        proxies[i]->refuse_for(refused_for);
        refused[i] = true;
      }
      all = all && refused[i];
    }
    if (all || *stop) break;
    co_await sleep_for(1ms);
  }
  *done = true;
}

// What the server holds at `key` for `token`, through a direct connection:
// the lock's value (GET, PTTL), or the semaphore's member (ZSCORE against the
// server's TIME; an expired member counts as gone, as the scripts count it).
// An empty `token` (a failed acquire: the handle has no token to give) stands
// for any holder: nobody else writes the key then, so whatever is there is
// what our attempts left.
struct hold_state {
  bool ours = false;
  long long ms_left = -2;  // how long it stays ours; -2 when not ours, -1 without expiry
  std::string value;       // what the server holds, for messages
};

asio::awaitable<redis::reply> must(redis::connection& direct, redis::command c) {
  auto [ec, r] = co_await direct.exec(std::move(c), with_ec);
  BOOST_TEST_REQUIRE(!ec, "on the direct connection: " << ec.message());
  co_return r;
}

asio::awaitable<hold_state> read_lock(redis::connection& direct, std::string key, std::string token) {
  hold_state out;
  auto value = co_await must(direct, redis::command("GET", key));
  if (value.is_bulk()) out.value = std::string(value.string());
  auto pttl = co_await must(direct, redis::command("PTTL", key));
  // PTTL -2: deleted between GET and PTTL; a value set in between is seen next time.
  out.ours = value.is_bulk() && (token.empty() || out.value == token) && pttl.integer() != -2;
  out.ms_left = out.ours ? pttl.integer() : -2;
  co_return out;
}

long long server_ms(const redis::reply& time) {
  return std::stoll(std::string(time.elements().at(0).string())) * 1000 +
         std::stoll(std::string(time.elements().at(1).string())) / 1000;
}

asio::awaitable<hold_state> read_lease(redis::connection& direct, std::string key, std::string token) {
  hold_state out;
  std::string score;
  if (token.empty()) {  // the member that lasts longest
    auto last = co_await must(direct, redis::command("ZRANGE", key, "-1", "-1", "WITHSCORES"));
    if (last.elements().size() == 2) score = std::string(last.elements()[1].string());
  } else {
    auto ours = co_await must(direct, redis::command("ZSCORE", key, token));
    if (ours.is_bulk()) score = std::string(ours.string());
  }
  if (score.empty()) co_return out;
  auto left = std::stoll(score) - server_ms(co_await must(direct, redis::command("TIME")));
  out.ours = left > 0;
  out.ms_left = out.ours ? left : -2;
  out.value = "a lease of " + std::to_string(left) + " ms";
  co_return out;
}

asio::awaitable<hold_state> read_hold(redis::connection& direct, std::string key, std::string token, bool lease) {
  if (lease) co_return co_await read_lease(direct, std::move(key), std::move(token));
  co_return co_await read_lock(direct, std::move(key), std::move(token));
}

// Nothing holds `token` on `direct` now, or (what a failed operation may
// leave) once its TTL has passed: it must have one.
asio::awaitable<void> expect_gone_by_ttl(redis::connection& direct, std::string key, std::string token, bool lease,
                                         std::string when) {
  auto state = co_await read_hold(direct, key, token, lease);
  if (!state.ours) co_return;
  BOOST_TEST(state.ms_left > 0, "our hold is left " << when << " without a TTL (" << state.ms_left << ")");
  BOOST_TEST_MESSAGE("our hold is left " << when << " (" << state.ms_left << " ms): waiting for its TTL");
  co_await sleep_for(std::chrono::milliseconds(std::max(0LL, state.ms_left)) + 100ms);
  auto after = co_await read_hold(direct, key, token, lease);
  BOOST_TEST(!after.ours, "our hold is still there " << when << " after its TTL");
}

bool is_connection_error(const error_code& ec) {
  return ec == redis::error::connection_lost || ec == redis::error::timed_out ||
         ec == redis::error::not_connected;
}

void expect_truthful(const error_code& ec, bool extra_ok, const std::string& what) {
  if (!ec) return;
  BOOST_TEST((is_connection_error(ec) || extra_ok), what << " reported '" << ec.message() << "' ("
                                                        << ec.category().name() << ":" << ec.value()
                                                        << "), not a truthful error for this fault");
}

// Waits (bounded) for the connection to be up again, so that the fault of a
// run stays one fault: the next operation does not meet the reconnection.
asio::awaitable<void> settle(redis::connection& conn) {
  for (int i = 0; i < 100 && conn.state() != redis::connection_state::connected; ++i) co_await sleep_for(20ms);
}

// ------------------------------------------------ redis::lock, redis::semaphore

// The one-server holds: the lock with a plain SET, the lock with its fencing
// script, a semaphore of one lease (the same shell, other commands).
enum class single { plain_lock, fenced_lock, lease };

redis::lock_options lock_options_for(single kind) {
  redis::lock_options lo;
  lo.ttl = ttl;
  lo.wait = 1000ms;
  lo.fencing = kind == single::fenced_lock;
  return lo;
}

redis::semaphore_options lease_options() {
  redis::semaphore_options so;
  so.ttl = ttl;
  so.wait = 1000ms;
  return so;
}

template <class Hold>
std::unique_ptr<Hold> make_hold(redis::connection& conn, const std::string& key, single kind) {
  if constexpr (std::is_same_v<Hold, redis::semaphore>)
    return std::make_unique<Hold>(conn, key, 1, lease_options());
  else
    return std::make_unique<Hold>(conn, key, lock_options_for(kind));
}

template <class Hold>
asio::awaitable<void> single_scenario(redis_proxy& proxy, plan p, single kind, std::shared_ptr<run_result> out) {
  auto ex = co_await asio::this_coro::executor;
  auto master = dlock::test::redis_masters().at(0);
  redis::connection direct(ex, options_for(master.host, master.port, true));
  co_await direct.connect();
  redis::connection conn(ex, options_for(proxy.host(), proxy.port()));
  co_await conn.connect();
  bool lease = kind == single::lease;
  auto key = dlock::test::unique_name("dlock-test:steps:single");
  auto holder = make_hold<Hold>(conn, key, kind);
  auto other = make_hold<Hold>(direct, key, kind);
  auto& lock = *holder;

  auto before = proxy.forwarded_commands();
  auto faults_before = proxy.faults();
  auto stop_refuser = std::make_shared<bool>(false);
  auto refuser_done = std::make_shared<bool>(true);
  arm(proxy, p, ex);
  bool error_fault = p.step > 0 && is_error_fault(p.kind);
  if (p.step > 0 && p.kind == fault::refuse) {
    *refuser_done = false;
    std::vector<redis_proxy*> proxies(1, &proxy);
    std::vector<int> counts(1, faults_before);
    asio::co_spawn(ex, refuse_when_fired(proxies, counts, stop_refuser, refuser_done), asio::detached);
  }

  auto [acquired] = co_await lock.acquire(with_ec);
  auto state = co_await read_hold(direct, key, lock.token(), lease);
  if (!acquired) {
    BOOST_TEST(lock.held());
    BOOST_TEST(state.ours, "acquire succeeded but the server holds '" << state.value << "'");
    if constexpr (!std::is_same_v<Hold, redis::semaphore>) {
      if (kind == single::fenced_lock) BOOST_TEST(lock.fencing_token() > 0);
    }
    auto [second] = co_await other->try_acquire(with_ec);
    BOOST_TEST((second == dlock::error::taken), "a second holder's try_acquire while we hold: " << second.message());
    if (!second) co_await other->release(with_ec);

    co_await settle(conn);
    auto [extended] = co_await lock.extend(ttl, with_ec);
    auto after_extend = co_await read_hold(direct, key, lock.token(), lease);
    if (!extended) {
      BOOST_TEST(after_extend.ours, "extend succeeded but the server holds '" << after_extend.value << "'");
    } else {
      // not_owned is the truth only when the server no longer holds our token.
      // not_owned and expired (a stall past the TTL) are the truth only when the server no longer holds our token.
      bool gone = (extended == dlock::error::not_owned || extended == dlock::error::expired) && !after_extend.ours;
      expect_truthful(extended, gone || (error_fault && is_server_error(extended)), "extend");
    }

    co_await settle(conn);
    auto token = lock.token();
    auto loss_reason = lock.loss().reason();  // a release after a loss reports it (the contract)
    auto [released] = co_await lock.release(with_ec);
    BOOST_TEST(!lock.held(), "held() after release");
    auto after_release = co_await read_hold(direct, key, token, lease);
    if (!released) {
      BOOST_TEST(!after_release.ours, "release succeeded but the server still holds our token");
    } else {
      expect_truthful(released,
                      (released == dlock::error::not_owned && !after_release.ours) ||
                          (loss_reason && released == loss_reason) || (error_fault && is_server_error(released)),
                      "release");
      co_await expect_gone_by_ttl(direct, key, token, lease, "after a failed release (" + released.message() + ")");
    }
  } else {
    BOOST_TEST(!lock.held(), "held() after a failed acquire");
    bool stalled = p.step > 0 && p.kind == fault::stall && acquired == dlock::error::expired;
    expect_truthful(acquired, stalled || (error_fault && is_server_error(acquired)), "acquire");
    co_await expect_gone_by_ttl(direct, key, lock.token(), lease,
                                "after a failed acquire (" + acquired.message() + ")");
  }

  *stop_refuser = true;
  while (!*refuser_done) co_await sleep_for(5ms);
  out->steps = proxy.forwarded_commands() - before;
  out->fired = proxy.faults() > faults_before;
  proxy.disarm();
  proxy.refuse_for(0ms);
  conn.close();
  direct.close();
}

// ---------------------------------------------------------------- redlock

constexpr std::size_t masters = 5;
constexpr std::size_t faulty = 3;  // a majority: the algorithm must cope, not outvote

// How many masters a fault hits: a majority, except errors (a minority, as
// a fleet meets them) and client pauses (one pause of the one client).
std::size_t masters_hit(const plan& p) {
  if (p.kind == fault::pause || p.kind == fault::stall) return 1;
  return is_error_fault(p.kind) ? faulty - 1 : faulty;
}

using connections = std::vector<std::shared_ptr<redis::connection>>;

asio::awaitable<connections> connect_all(asio::any_io_executor ex, std::vector<dlock::test::endpoint> endpoints,
                                         bool checker) {
  connections out;
  for (auto& e : endpoints) {
    out.push_back(std::make_shared<redis::connection>(ex, options_for(e.host, e.port, checker)));
    co_await out.back()->connect();
  }
  co_return out;
}

// How many masters hold `token` in `key`.
asio::awaitable<std::size_t> holders(connections& direct, std::string key, std::string token) {
  std::size_t n = 0;
  for (auto& c : direct) {
    auto state = co_await read_lock(*c, key, token);
    if (state.ours) ++n;
  }
  co_return n;
}

asio::awaitable<void> expect_all_gone_by_ttl(connections& direct, std::string key, std::string token,
                                             std::string when) {
  for (auto& c : direct) co_await expect_gone_by_ttl(*c, key, token, false, when);
}

bool redlock_error(const error_code& ec) {
  return ec == dlock::error::no_quorum || ec == dlock::error::expired || ec == dlock::error::lost;
}

asio::awaitable<void> redlock_scenario(std::vector<std::unique_ptr<redis_proxy>>& proxies, plan p,
                                       std::shared_ptr<run_result> out) {
  auto ex = co_await asio::this_coro::executor;
  auto direct = co_await connect_all(ex, dlock::test::redis_masters(), true);
  std::vector<dlock::test::endpoint> through;
  for (auto& proxy : proxies) through.push_back({proxy->host(), proxy->port()});
  auto conns = co_await connect_all(ex, through, false);
  auto key = dlock::test::unique_name("dlock-test:steps:redlock");
  redis::redlock_options ro;
  ro.ttl = ttl;
  ro.master_timeout = master_timeout;
  ro.retry_count = 2;
  ro.retry_delay = 100ms;
  ro.retry_jitter = 20ms;
  redis::redlock lock(ex, conns, key, ro);
  redis::redlock other(ex, direct, key, ro);

  auto before = proxies[0]->forwarded_commands();
  std::vector<redis_proxy*> armed;
  std::vector<int> faults_before;
  for (std::size_t i = 0; i < masters_hit(p); ++i) {
    armed.push_back(proxies[i].get());
    faults_before.push_back(proxies[i]->faults());
    arm(*proxies[i], p, ex);
  }
  auto stop_refuser = std::make_shared<bool>(false);
  auto refuser_done = std::make_shared<bool>(true);
  if (p.step > 0 && p.kind == fault::refuse) {
    *refuser_done = false;
    asio::co_spawn(ex, refuse_when_fired(armed, faults_before, stop_refuser, refuser_done), asio::detached);
  }

  auto [acquired] = co_await lock.acquire(with_ec);
  auto token = lock.token();
  if (!acquired) {
    BOOST_TEST(lock.held());
    auto n = co_await holders(direct, key, token);
    // The stall hits one master's command: the others' yes may decide the
    // round before it begins, and the keys expire during it. The holder's
    // own validity then says so; that is all a paused client can be told.
    auto ran_out_in_a_stall = [&] { return p.step > 0 && p.kind == fault::stall && lock.validity().count() == 0; };
    BOOST_TEST((n >= masters / 2 + 1 || ran_out_in_a_stall()),
               "acquire succeeded but only " << n << " masters hold our token");
    auto [second] = co_await other.try_acquire(with_ec);
    BOOST_TEST((bool(second) || ran_out_in_a_stall()), "a second Redlock's try_acquire succeeded while we hold");
    if (!second) co_await other.release(with_ec);

    for (auto& c : conns) co_await settle(*c);
    auto [extended] = co_await lock.extend(ttl, with_ec);
    if (!extended) {
      auto m = co_await holders(direct, key, token);
      BOOST_TEST((m >= masters / 2 + 1 || ran_out_in_a_stall()),
                 "extend succeeded but only " << m << " masters hold our token");
    } else {
      BOOST_TEST(!lock.held(), "extend failed (" << extended.message() << ") but held() is true");
      expect_truthful(extended, redlock_error(extended), "extend");
    }

    for (auto& c : conns) co_await settle(*c);
    auto [released] = co_await lock.release(with_ec);
    BOOST_TEST(!lock.held(), "held() after release");
    if (!released) {
      auto m = co_await holders(direct, key, token);
      BOOST_TEST(m < masters / 2 + 1, "release succeeded but " << m << " masters still hold our token");
    } else {
      expect_truthful(released, redlock_error(released) || released == dlock::error::not_owned ||
                                    (released == dlock::error::not_held && extended), "release");
    }
    // The slower masters' releases finish in the background; a key they could not reach goes with its TTL.
    co_await expect_all_gone_by_ttl(direct, key, token, "after release (" + released.message() + ")");
  } else {
    BOOST_TEST(!lock.held(), "held() after a failed acquire");
    expect_truthful(acquired, redlock_error(acquired), "acquire");
    co_await expect_all_gone_by_ttl(direct, key, token, "after a failed acquire (" + acquired.message() + ")");
  }

  *stop_refuser = true;
  while (!*refuser_done) co_await sleep_for(5ms);
  out->steps = proxies[0]->forwarded_commands() - before;
  out->fired = false;
  for (std::size_t i = 0; i < armed.size(); ++i) out->fired = out->fired || armed[i]->faults() > faults_before[i];
  for (auto& proxy : proxies) {
    proxy->disarm();
    proxy->refuse_for(0ms);
  }
  for (auto& c : conns) c->close();
  for (auto& c : direct) c->close();
}

// ---------------------------------------------------------------- driver

template <class Body>
run_result run_once(Body body) {
  auto out = std::make_shared<run_result>();
  asio::io_context io;
  std::exception_ptr failure;
  bool finished = false;
  asio::co_spawn(io, body(out), [&](std::exception_ptr e) {
    failure = e;
    finished = true;
  });
  io.run();
  BOOST_REQUIRE(finished);
  if (failure) std::rethrow_exception(failure);
  return *out;
}

// Scripts are loaded on first use (a NOSCRIPT round trip): a warm-up run
// first, so the counted run takes the steps every later run takes.
template <class Body>
void every_step(const std::string& recipe, Body body) {
  dlock::test::for_each_step(
      recipe, fault_names,
      [&] {
        run_once([&](std::shared_ptr<run_result> out) { return body(plan{}, out); });
        return run_once([&](std::shared_ptr<run_result> out) { return body(plan{}, out); }).steps;
      },
      [&](int k, std::size_t kind) {
        plan p{k, static_cast<fault>(kind)};
        auto r = run_once([&](std::shared_ptr<run_result> out) { return body(p, out); });
        return r.fired ? step_outcome::fired : step_outcome::not_reached;
      });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(steps_redis)

BOOST_AUTO_TEST_CASE(lock_every_step) {
  auto master = dlock::test::redis_masters().at(0);
  redis_proxy proxy(master.host, master.port);
  every_step("redis lock", [&](plan p, std::shared_ptr<run_result> out) {
    return single_scenario<redis::lock>(proxy, p, single::plain_lock, out);
  });
}

BOOST_AUTO_TEST_CASE(fenced_lock_every_step) {
  auto master = dlock::test::redis_masters().at(0);
  redis_proxy proxy(master.host, master.port);
  every_step("fenced redis lock", [&](plan p, std::shared_ptr<run_result> out) {
    return single_scenario<redis::lock>(proxy, p, single::fenced_lock, out);
  });
}

BOOST_AUTO_TEST_CASE(semaphore_every_step) {
  auto master = dlock::test::redis_masters().at(0);
  redis_proxy proxy(master.host, master.port);
  every_step("redis semaphore", [&](plan p, std::shared_ptr<run_result> out) {
    return single_scenario<redis::semaphore>(proxy, p, single::lease, out);
  });
}

BOOST_AUTO_TEST_CASE(redlock_every_step) {
  std::vector<std::unique_ptr<redis_proxy>> proxies;
  for (auto& m : dlock::test::redis_masters()) proxies.push_back(std::make_unique<redis_proxy>(m.host, m.port));
  BOOST_TEST_REQUIRE(proxies.size() == masters);
  every_step("redlock", [&](plan p, std::shared_ptr<run_result> out) { return redlock_scenario(proxies, p, out); });
}

BOOST_AUTO_TEST_SUITE_END()
