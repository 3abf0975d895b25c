// Fault injection at every step of the Redis recipes (safety issue: "fault
// injection at every step"). Each scenario (acquire, extend, release) runs
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
//            expiry).
// For Redlock the same fault hits a majority of the masters (three of five)
// at their command k. After each operation a direct connection checks the
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

enum class fault { cut, drop, delay, refuse, expire };
const std::vector<std::string> fault_names = {"cut", "drop", "delay", "refuse", "expire"};

struct plan {
  int step = 0;  // 0: no fault
  fault kind = fault::cut;
};

struct run_result {
  int steps = 0;
  bool fired = false;
};

void arm(redis_proxy& proxy, const plan& p) {
  if (p.step == 0) return;
  switch (p.kind) {
    case fault::cut: proxy.cut_after(20ms, p.step); break;
    case fault::drop: proxy.drop_reply(p.step); break;
    case fault::delay: proxy.hold_replies(held_reply, p.step); break;
    case fault::refuse: proxy.cut_after(20ms, p.step); break;  // refuse_when_fired does the rest
    case fault::expire: proxy.hold_replies(ttl + 300ms, p.step); break;
  }
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

// GET and PTTL of `key` through a direct connection.
struct key_state {
  std::string value;  // "" when absent
  long long pttl = -2;
};

asio::awaitable<key_state> read_key(redis::connection& direct, std::string key) {
  key_state out;
  auto [get_ec, value] = co_await direct.exec(redis::command("GET", key), with_ec);
  BOOST_TEST_REQUIRE(!get_ec, "GET on the direct connection: " << get_ec.message());
  if (value.is_bulk()) out.value = std::string(value.string());
  auto [pttl_ec, pttl] = co_await direct.exec(redis::command("PTTL", key), with_ec);
  BOOST_TEST_REQUIRE(!pttl_ec);
  out.pttl = pttl.integer();
  co_return out;
}

// No key holding `token` on `direct` now, or (a key a failed operation may
// leave) once its TTL has passed: it must have one.
asio::awaitable<void> expect_gone_by_ttl(redis::connection& direct, std::string key, std::string token,
                                         std::string when) {
  auto state = co_await read_key(direct, key);
  if (state.value != token || state.pttl == -2) co_return;  // -2: deleted between GET and PTTL
  BOOST_TEST(state.pttl > 0, "our key is left " << when << " without a TTL (PTTL " << state.pttl << ")");
  BOOST_TEST_MESSAGE("our key is left " << when << " (PTTL " << state.pttl << " ms): waiting for its TTL");
  co_await sleep_for(std::chrono::milliseconds(std::max(0LL, state.pttl)) + 100ms);
  auto after = co_await read_key(direct, key);
  BOOST_TEST(after.value != token, "our key is still there " << when << " after its TTL");
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

// ---------------------------------------------------------------- redis::lock

asio::awaitable<void> lock_scenario(redis_proxy& proxy, plan p, std::shared_ptr<run_result> out) {
  auto ex = co_await asio::this_coro::executor;
  auto master = dlock::test::redis_masters().at(0);
  redis::connection direct(ex, options_for(master.host, master.port, true));
  co_await direct.connect();
  redis::connection conn(ex, options_for(proxy.host(), proxy.port()));
  co_await conn.connect();
  auto key = dlock::test::unique_name("dlock-test:steps:lock");
  redis::lock_options lo;
  lo.ttl = ttl;
  lo.wait = 1000ms;
  redis::lock lock(conn, key, lo);
  redis::lock_options other_options = lo;
  redis::lock other(direct, key, other_options);

  auto before = proxy.forwarded_commands();
  auto faults_before = proxy.faults();
  auto stop_refuser = std::make_shared<bool>(false);
  auto refuser_done = std::make_shared<bool>(true);
  arm(proxy, p);
  if (p.step > 0 && p.kind == fault::refuse) {
    *refuser_done = false;
    std::vector<redis_proxy*> proxies(1, &proxy);
    std::vector<int> counts(1, faults_before);
    asio::co_spawn(ex, refuse_when_fired(proxies, counts, stop_refuser, refuser_done), asio::detached);
  }

  auto [acquired] = co_await lock.acquire(with_ec);
  auto state = co_await read_key(direct, key);
  if (!acquired) {
    BOOST_TEST(lock.held());
    BOOST_TEST(state.value == lock.token(), "acquire succeeded but the key holds '" << state.value << "'");
    auto [second] = co_await other.try_acquire(with_ec);
    BOOST_TEST((second == dlock::error::taken), "a second lock's try_acquire while we hold: " << second.message());
    if (!second) co_await other.release(with_ec);

    co_await settle(conn);
    auto [extended] = co_await lock.extend(ttl, with_ec);
    auto after_extend = co_await read_key(direct, key);
    if (!extended) {
      BOOST_TEST(after_extend.value == lock.token(), "extend succeeded but the key holds '" << after_extend.value << "'");
    } else {
      // not_owned is the truth only when the key no longer holds our token.
      expect_truthful(extended, extended == dlock::error::not_owned && after_extend.value != lock.token(), "extend");
    }

    co_await settle(conn);
    auto token = lock.token();
    auto loss_reason = lock.loss().reason();  // a release after a loss reports it (the contract)
    auto [released] = co_await lock.release(with_ec);
    BOOST_TEST(!lock.held(), "held() after release");
    auto after_release = co_await read_key(direct, key);
    if (!released) {
      BOOST_TEST(after_release.value != token, "release succeeded but the key still holds our token");
    } else {
      expect_truthful(released,
                      (released == dlock::error::not_owned && after_release.value != token) ||
                          (loss_reason && released == loss_reason),
                      "release");
      co_await expect_gone_by_ttl(direct, key, token, "after a failed release (" + released.message() + ")");
    }
  } else {
    BOOST_TEST(!lock.held(), "held() after a failed acquire");
    expect_truthful(acquired, false, "acquire");
    co_await expect_gone_by_ttl(direct, key, lock.token(), "after a failed acquire (" + acquired.message() + ")");
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
    auto state = co_await read_key(*c, key);
    if (state.value == token) ++n;
  }
  co_return n;
}

asio::awaitable<void> expect_all_gone_by_ttl(connections& direct, std::string key, std::string token,
                                             std::string when) {
  for (auto& c : direct) co_await expect_gone_by_ttl(*c, key, token, when);
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
  for (std::size_t i = 0; i < faulty; ++i) {
    armed.push_back(proxies[i].get());
    faults_before.push_back(proxies[i]->faults());
    arm(*proxies[i], p);
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
    BOOST_TEST(n >= masters / 2 + 1, "acquire succeeded but only " << n << " masters hold our token");
    auto [second] = co_await other.try_acquire(with_ec);
    BOOST_TEST(bool(second), "a second Redlock's try_acquire succeeded while we hold");
    if (!second) co_await other.release(with_ec);

    for (auto& c : conns) co_await settle(*c);
    auto [extended] = co_await lock.extend(ttl, with_ec);
    if (!extended) {
      auto m = co_await holders(direct, key, token);
      BOOST_TEST(m >= masters / 2 + 1, "extend succeeded but only " << m << " masters hold our token");
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
  for (std::size_t i = 0; i < faulty; ++i) out->fired = out->fired || proxies[i]->faults() > faults_before[i];
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
  every_step("redis lock", [&](plan p, std::shared_ptr<run_result> out) { return lock_scenario(proxy, p, out); });
}

BOOST_AUTO_TEST_CASE(redlock_every_step) {
  std::vector<std::unique_ptr<redis_proxy>> proxies;
  for (auto& m : dlock::test::redis_masters()) proxies.push_back(std::make_unique<redis_proxy>(m.host, m.port));
  BOOST_TEST_REQUIRE(proxies.size() == masters);
  every_step("redlock", [&](plan p, std::shared_ptr<run_result> out) { return redlock_scenario(proxies, p, out); });
}

BOOST_AUTO_TEST_SUITE_END()
