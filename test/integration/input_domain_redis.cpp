// The domain of every input of the Redis side (issue #31, "What to build",
// item 5): every public option and argument at its edges and beyond. Each
// one is either accepted and works (acquired, the key on the server, released,
// the key gone), or refused at once with dlock::error::invalid_argument:
// nothing sent (the connection's command counter does not move) and nothing
// on the server. RELIABILITY.md, "What is refused, and why", lists the
// refusals; this file is their table.
//
// Inventory (what each table below covers):
//   redis::lock_options / semaphore_options   hold_cases: ttl, wait, retry_delay, retry_jitter,
//                                             drift_factor, drift_extra, auto_extend,
//                                             extend_fraction, max_hold (+ lock's fencing)
//   key (lock, semaphore, redlock)            key_cases: empty, 1 byte, binary, UTF-8, 64 KB, 1 MB
//   semaphore max_leases                      max_leases_cases
//   acquire_for(limit), extend(ttl)           limit_cases, extend_cases
//   redlock_options, masters                  redlock_cases, master_cases
//   fencing tokens up to INT64_MAX            fencing_* tests (lock, redlock, fenced_set)
//   a lock on another lock's "<key>:fencing"  counter_key_taken_by_a_lock_*
//   commands on a shared connection           command_cases
//   redis::options (connect)                  connection_cases
#include "integration/redlock_support.hpp"

#include <dlock/error.hpp>
#include <dlock/limits.hpp>
#include <dlock/redis/fenced.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/redis/semaphore.hpp>
#include <dlock/stall_monitor.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

using namespace redlock_test;
using dlock::test::unique_name;

namespace {

using ms = std::chrono::milliseconds;
constexpr auto max_ms = dlock::max_duration;
constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();
constexpr double nan = std::numeric_limits<double>::quiet_NaN();
constexpr double inf = std::numeric_limits<double>::infinity();

// works: accepted, and does what it says. refused: invalid_argument at once,
// nothing sent, nothing left. refused_elsewhere: the same, refused by a
// check other than the option's own range (a TTL no larger than the drift
// allowance, issue #31).
enum class expect { works, refused, refused_elsewhere };

// ------------------------------------------------------------ server probes

asio::awaitable<long long> integer_command(redis::connection& conn, redis::command cmd) {
  auto op = conn.exec(std::move(cmd), tuple_token);
  auto [ec, answer] = co_await std::move(op);
  BOOST_REQUIRE_MESSAGE(!ec, "probe: " + ec.message());
  co_return answer.is_integer() ? answer.integer() : -999;
}

asio::awaitable<bool> exists(redis::connection& conn, std::string key) {
  co_return co_await integer_command(conn, redis::command("EXISTS", key)) == 1;
}

asio::awaitable<std::string> get_text(redis::connection& conn, std::string key) {
  auto op = conn.exec(redis::command("GET", key), tuple_token);
  auto [ec, answer] = co_await std::move(op);
  BOOST_REQUIRE(!ec);
  co_return answer.is_nil() ? std::string("(nil)") : std::string(answer.string());
}

asio::awaitable<void> set_text(redis::connection& conn, std::string key, std::string value) {
  auto op = conn.exec(redis::command("SET", key, value), tuple_token);
  auto [ec, answer] = co_await std::move(op);
  BOOST_REQUIRE(!ec && answer.is_ok());
}

// The key of a case: fresh for each run (other tests run alongside).
std::string fresh(const char* what) { return unique_name(std::string("domain-") + what); }

// ------------------------------------------------------------ hold options

struct hold_case {
  const char* name;
  void (*lock)(redis::lock_options&);
  void (*semaphore)(redis::semaphore_options&);
  expect outcome;
};

// One mutation, for both option structs (they share these fields).
#define HOLD_CASE(name, body, outcome) \
  hold_case { name, [](redis::lock_options& o) { body; }, [](redis::semaphore_options& o) { body; }, outcome }

const std::vector<hold_case>& hold_cases() {
  using enum expect;
  static const std::vector<hold_case> cases{
      HOLD_CASE("defaults", (void)o, works),
      // ttl: the key's PX, and every deadline beside it
      HOLD_CASE("ttl 0", o.ttl = ms(0), refused),
      HOLD_CASE("ttl -1ms", o.ttl = ms(-1), refused),
      HOLD_CASE("ttl min", o.ttl = ms::min(), refused),
      HOLD_CASE("ttl 1ms (below the drift allowance)", o.ttl = ms(1), refused_elsewhere),
      HOLD_CASE("ttl 100ms", o.ttl = ms(100), works),
      HOLD_CASE("ttl 30 days", o.ttl = std::chrono::hours(24 * 30), works),
      HOLD_CASE("ttl max_duration", o.ttl = max_ms, works),
      HOLD_CASE("ttl max_duration + 1ms", o.ttl = max_ms + ms(1), refused),
      HOLD_CASE("ttl ms::max (PX and deadlines overflow)", o.ttl = ms::max(), refused),
      // wait
      HOLD_CASE("wait 0", o.wait = ms(0), works),
      HOLD_CASE("wait -1ms", o.wait = ms(-1), refused),
      HOLD_CASE("wait min", o.wait = ms::min(), refused),
      HOLD_CASE("wait max_duration", o.wait = max_ms, works),
      HOLD_CASE("wait max_duration + 1ms", o.wait = max_ms + ms(1), refused),
      HOLD_CASE("wait ms::max", o.wait = ms::max(), refused),
      // retry_delay, retry_jitter
      HOLD_CASE("retry_delay 0", o.retry_delay = ms(0), works),
      HOLD_CASE("retry_delay -1ms", o.retry_delay = ms(-1), refused),
      HOLD_CASE("retry_delay max_duration", o.retry_delay = max_ms, works),
      HOLD_CASE("retry_delay ms::max", o.retry_delay = ms::max(), refused),
      HOLD_CASE("retry_jitter 0", o.retry_jitter = ms(0), works),
      HOLD_CASE("retry_jitter -1ms", o.retry_jitter = ms(-1), refused),
      HOLD_CASE("retry_jitter above retry_delay", o.retry_jitter = ms(10'000), works),
      HOLD_CASE("retry_jitter ms::max", o.retry_jitter = ms::max(), refused),
      // drift_factor: in [0, 1)
      HOLD_CASE("drift_factor 0", o.drift_factor = 0.0, works),
      HOLD_CASE("drift_factor -0.0", o.drift_factor = -0.0, works),
      HOLD_CASE("drift_factor denorm_min", o.drift_factor = std::numeric_limits<double>::denorm_min(), works),
      HOLD_CASE("drift_factor 0.5", o.drift_factor = 0.5, works),
      HOLD_CASE("drift_factor just below 1 (drift above ttl)", o.drift_factor = std::nextafter(1.0, 0.0),
                refused_elsewhere),
      HOLD_CASE("drift_factor 1", o.drift_factor = 1.0, refused),
      HOLD_CASE("drift_factor -1e-300", o.drift_factor = -1e-300, refused),
      HOLD_CASE("drift_factor NaN", o.drift_factor = nan, refused),
      HOLD_CASE("drift_factor inf", o.drift_factor = inf, refused),
      HOLD_CASE("drift_factor -inf", o.drift_factor = -inf, refused),
      // drift_extra
      HOLD_CASE("drift_extra 0", o.drift_extra = ms(0), works),
      HOLD_CASE("drift_extra -1ms", o.drift_extra = ms(-1), refused),
      HOLD_CASE("drift_extra 5s of a 10s ttl", o.drift_extra = ms(5'000), works),
      HOLD_CASE("drift_extra = ttl", o.drift_extra = o.ttl, refused_elsewhere),
      HOLD_CASE("drift_extra ms::max", o.drift_extra = ms::max(), refused),
      // extend_fraction: in (0, 1), checked with or without auto_extend
      HOLD_CASE("extend_fraction 0", o.extend_fraction = 0.0, refused),
      HOLD_CASE("extend_fraction 1", o.extend_fraction = 1.0, refused),
      HOLD_CASE("extend_fraction -0.5", o.extend_fraction = -0.5, refused),
      HOLD_CASE("extend_fraction NaN", o.extend_fraction = nan, refused),
      HOLD_CASE("extend_fraction inf", o.extend_fraction = inf, refused),
      HOLD_CASE("extend_fraction 0.999 with auto_extend", (o.extend_fraction = 0.999, o.auto_extend = true), works),
      HOLD_CASE("extend_fraction 0.01 with auto_extend", (o.extend_fraction = 0.01, o.auto_extend = true), works),
      // max_hold
      HOLD_CASE("max_hold 0", o.max_hold = ms(0), works),
      HOLD_CASE("max_hold -1ms", o.max_hold = ms(-1), refused),
      HOLD_CASE("max_hold 1ms with auto_extend", (o.max_hold = ms(1), o.auto_extend = true), works),
      HOLD_CASE("max_hold max_duration", o.max_hold = max_ms, works),
      HOLD_CASE("max_hold ms::max", o.max_hold = ms::max(), refused),
      HOLD_CASE("auto_extend with ttl 100ms", (o.ttl = ms(100), o.auto_extend = true), works),
  };
  return cases;
}

// One case on one lock: refused (nothing sent, nothing left) or works
// (acquired, the key there, released, the key gone).
template <class Lock>
asio::awaitable<void> check_hold(redis::connection& conn, Lock& lock, std::string label, expect outcome,
                                 std::vector<std::string> keys_left_alone) {
  auto sent = conn.stats().commands;
  auto [ec] = co_await lock.try_acquire(tuple_token);
  if (outcome == expect::works) {
    BOOST_CHECK_MESSAGE(!ec, label << ": try_acquire: " << ec.message());
    if (!ec) {
      BOOST_CHECK_MESSAGE(co_await exists(conn, lock.key()), label << ": the key is not on the server");
      auto [ec_r] = co_await lock.release(tuple_token);
      BOOST_CHECK_MESSAGE(!ec_r, label << ": release: " << ec_r.message());
    }
  } else {
    bool refused = ec == dlock::error::invalid_argument && conn.stats().commands == sent;
    auto [ec_a] = co_await lock.acquire(tuple_token);
    auto [ec_f] = co_await lock.acquire_for(ms(100), tuple_token);
    refused = refused && ec_a == dlock::error::invalid_argument && ec_f == dlock::error::invalid_argument &&
              conn.stats().commands == sent;
    if (outcome == expect::refused)
      BOOST_CHECK_MESSAGE(refused, label << ": not refused at once: " << ec.message() << " / " << ec_a.message()
                                         << " / " << ec_f.message());
    else
      BOOST_CHECK_MESSAGE(refused, label << ": not refused at once (issue #31): " << ec.message());
    if (!refused && !ec) co_await lock.release(tuple_token);
  }
  if (!lock.key().empty()) BOOST_CHECK_MESSAGE(!co_await exists(conn, lock.key()), label << ": the key is left");
  for (auto& k : keys_left_alone) BOOST_CHECK_MESSAGE(!co_await exists(conn, k), label << ": " << k << " is left");
}

asio::awaitable<void> hold_options_lock(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto& conn = *masters[0];
  for (bool fencing : {false, true}) {
    for (const auto& c : hold_cases()) {
      redis::lock_options o;
      o.fencing = fencing;
      c.lock(o);
      auto key = fresh("lock");
      redis::lock lock(conn, key, o);
      std::string label = std::string("lock") + (fencing ? " (fenced) " : " ") + c.name;
      // A refused fenced lock must not have created its counter either.
      std::vector<std::string> untouched;
      if (fencing && c.outcome == expect::refused) untouched.push_back(key + ":fencing");
      co_await check_hold(conn, lock, label, c.outcome, untouched);
    }
  }
  close_all(masters);
}

asio::awaitable<void> hold_options_semaphore(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto& conn = *masters[0];
  for (const auto& c : hold_cases()) {
    redis::semaphore_options o;
    c.semaphore(o);
    redis::semaphore lease(conn, fresh("sem"), 2, o);
    co_await check_hold(conn, lease, std::string("semaphore ") + c.name, c.outcome, {});
  }
  // The lock's options, but a lease has no fencing token to give.
  redis::semaphore fenced(conn, fresh("sem"), 2, {.fencing = true});
  co_await check_hold(conn, fenced, "semaphore fencing on", expect::refused, {});
  close_all(masters);
}

// A TTL far beyond the defaults is honoured on the server (PX), not wrapped.
asio::awaitable<void> long_ttl_is_set_exactly(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto& conn = *masters[0];
  for (ms ttl : {ms(std::chrono::hours(24 * 30)), max_ms}) {
    redis::lock lock(conn, fresh("long-ttl"), {.ttl = ttl});
    co_await lock.acquire();
    auto pttl = co_await integer_command(conn, redis::command("PTTL", lock.key()));
    BOOST_CHECK_GT(pttl, ttl.count() - 60'000);
    BOOST_CHECK_LE(pttl, ttl.count());
    BOOST_CHECK_GT(lock.validity(), ttl / 2);
    co_await lock.release();
  }
  close_all(masters);
}

}  // namespace

BOOST_AUTO_TEST_CASE(hold_options_of_the_lock) { run(hold_options_lock); }
BOOST_AUTO_TEST_CASE(hold_options_of_the_semaphore) { run(hold_options_semaphore); }
BOOST_AUTO_TEST_CASE(ttls_up_to_max_duration_reach_the_server_exactly) { run(long_ttl_is_set_exactly); }

// ------------------------------------------------------------ keys

namespace {

struct key_case {
  const char* name;
  std::string (*make)();
  expect outcome;
};

const std::vector<key_case>& key_cases() {
  using enum expect;
  static const std::vector<key_case> cases{
      {"empty", [] { return std::string(); }, refused},
      {"one byte", [] { return std::string(1, '\x1d'); }, works},
      {"binary: NUL, CR LF, RESP markers",
       [] { return fresh("bin") + std::string("\0\r\n$*-+:\x01\xff", 11); }, works},
      {"UTF-8 and spaces", [] { return fresh("ünïcødé key ✓"); }, works},
      {"braces (a cluster hash tag)", [] { return "{" + fresh("tag") + "}-lock"; }, works},
      {"64 KB", [] { return fresh("big") + std::string(64 * 1024, 'k'); }, works},
      {"1 MB", [] { return fresh("huge") + std::string(1024 * 1024, 'k'); }, works},
  };
  return cases;
}

// The one-byte key cannot be fresh: its counter, left by an earlier run or
// by another lock kind on one master only, would make a fenced Redlock on
// it unavailable (by design: too few masters keep a counter).
asio::awaitable<void> forget_one_byte_key(masters_t masters) {
  for (auto& m : masters) {
    auto op = m->exec(redis::command("DEL", std::string(1, '\x1d'), std::string(1, '\x1d') + ":fencing"), tuple_token);
    co_await std::move(op);
  }
}

asio::awaitable<void> keys_lock_and_semaphore(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto& conn = *masters[0];
  co_await forget_one_byte_key(masters);
  for (const auto& c : key_cases()) {
    for (bool fencing : {false, true}) {
      auto key = c.make();
      redis::lock lock(conn, key, {.fencing = fencing});
      std::vector<std::string> untouched;
      if (c.outcome != expect::works) untouched.push_back(key + ":fencing");
      co_await check_hold(conn, lock, std::string("lock key ") + (fencing ? "(fenced) " : "") + c.name, c.outcome,
                          untouched);
    }
    redis::semaphore lease(conn, c.make(), 1);
    co_await check_hold(conn, lease, std::string("semaphore key ") + c.name, c.outcome, {});
  }
  co_await forget_one_byte_key(masters);
  close_all(masters);
}

// Redlock's acquire reports through a round; a case runs on three masters.
asio::awaitable<void> check_redlock(masters_t masters, redis::redlock& rl, std::string label, expect outcome) {
  std::vector<std::uint64_t> sent;
  for (auto& m : masters) sent.push_back(m ? m->stats().commands : 0);
  auto [ec] = co_await rl.try_acquire(tuple_token);
  if (outcome == expect::works) {
    BOOST_CHECK_MESSAGE(!ec, label << ": try_acquire: " << ec.message());
    BOOST_CHECK_MESSAGE(rl.invalid_reason().empty(), label << ": " << rl.invalid_reason());
    if (!ec) {
      BOOST_CHECK_MESSAGE(co_await exists(*masters[0], rl.key()), label << ": the key is not on the server");
      auto [ec_r] = co_await rl.release(tuple_token);
      BOOST_CHECK_MESSAGE(!ec_r, label << ": release: " << ec_r.message());
    }
  } else {
    auto [ec_a] = co_await rl.acquire(tuple_token);
    auto [ec_f] = co_await rl.acquire_for(ms(100), tuple_token);
    bool nothing_sent = true;
    for (std::size_t i = 0; i < masters.size(); ++i)
      if (masters[i] && masters[i]->stats().commands != sent[i]) nothing_sent = false;
    bool refused = ec == dlock::error::invalid_argument && ec_a == dlock::error::invalid_argument &&
                   ec_f == dlock::error::invalid_argument && nothing_sent;
    if (outcome == expect::refused) {
      BOOST_CHECK_MESSAGE(refused, label << ": not refused at once: " << ec.message() << " / " << ec_a.message()
                                         << " / " << ec_f.message() << (nothing_sent ? "" : " (commands sent)"));
      BOOST_CHECK_MESSAGE(!rl.invalid_reason().empty(), label << ": no invalid_reason()");
    } else {
      BOOST_CHECK_MESSAGE(refused, label << ": not refused at once (issue #31): " << ec.message());
    }
    if (!ec) co_await rl.release(tuple_token);
  }
  if (!rl.key().empty())
    for (auto& m : masters)
      if (m) BOOST_CHECK_MESSAGE(!co_await exists(*m, rl.key()), label << ": the key is left on a master");
}

asio::awaitable<void> keys_redlock(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 3);
  co_await forget_one_byte_key(masters);
  for (const auto& c : key_cases()) {
    for (bool fencing : {false, true}) {
      redis::redlock rl(ex, masters, c.make(), {.fencing = fencing});
      co_await check_redlock(masters, rl, std::string("redlock key ") + (fencing ? "(fenced) " : "") + c.name,
                             c.outcome);
    }
  }
  close_all(masters);
}

}  // namespace

BOOST_AUTO_TEST_CASE(keys_of_the_lock_and_the_semaphore) { run(keys_lock_and_semaphore); }
BOOST_AUTO_TEST_CASE(keys_of_the_redlock) { run(keys_redlock); }

// ------------------------------------------------------------ counts and limits

namespace {

asio::awaitable<void> max_leases_domain(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto& conn = *masters[0];
  struct count_case {
    std::size_t max_leases;
    expect outcome;
  };
  for (auto c : {count_case{0, expect::refused}, count_case{1, expect::works},
                 count_case{std::size_t(1) << 53, expect::works}, count_case{(std::size_t(1) << 53) + 1, expect::works},
                 count_case{std::size_t(int64_max), expect::works},
                 count_case{std::numeric_limits<std::size_t>::max(), expect::works}}) {
    redis::semaphore lease(conn, fresh("leases"), c.max_leases);
    co_await check_hold(conn, lease, "max_leases " + std::to_string(c.max_leases), c.outcome, {});
  }
  // max_leases 1 admits one holder, not two.
  auto key = fresh("one-lease");
  redis::semaphore first(conn, key, 1), second(conn, key, 1);
  co_await first.acquire();
  auto [ec] = co_await second.try_acquire(tuple_token);
  BOOST_CHECK(ec == dlock::error::taken);
  co_await first.release();
  close_all(masters);
}

struct limit_case {
  const char* name;
  std::chrono::steady_clock::duration limit;
  expect outcome;
};

const std::vector<limit_case>& limit_cases() {
  using enum expect;
  using std::chrono::steady_clock;
  static const std::vector<limit_case> cases{
      {"0", steady_clock::duration::zero(), refused},
      {"-1ns", std::chrono::nanoseconds(-1), refused},
      {"duration::min", steady_clock::duration::min(), refused},
      {"1ns (rounded up to 1ms)", std::chrono::nanoseconds(1), works},
      {"1ms", ms(1), works},
      {"max_duration", max_ms, works},
      {"max_duration + 1ms", max_ms + ms(1), refused},
      {"duration::max", steady_clock::duration::max(), refused},
  };
  return cases;
}

template <class Lock>
asio::awaitable<void> check_limit(redis::connection& conn, Lock& lock, std::string label, const limit_case& c) {
  auto sent = conn.stats().commands;
  auto [ec] = co_await lock.acquire_for(c.limit, tuple_token);
  if (c.outcome == expect::works) {
    BOOST_CHECK_MESSAGE(!ec, label << ": " << ec.message());
    if (!ec) co_await lock.release();
  } else {
    BOOST_CHECK_MESSAGE(ec == dlock::error::invalid_argument && conn.stats().commands == sent,
                        label << ": not refused at once: " << ec.message());
  }
  BOOST_CHECK_MESSAGE(!co_await exists(conn, lock.key()), label << ": the key is left");
}

asio::awaitable<void> acquire_for_limits(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto& conn = *masters[0];
  for (const auto& c : limit_cases()) {
    redis::lock lock(conn, fresh("limit"));
    co_await check_limit(conn, lock, std::string("lock acquire_for ") + c.name, c);
    redis::semaphore lease(conn, fresh("limit"), 1);
    co_await check_limit(conn, lease, std::string("semaphore acquire_for ") + c.name, c);
    redis::redlock rl(ex, masters, fresh("limit"));
    co_await check_limit(conn, rl, std::string("redlock acquire_for ") + c.name, c);
  }
  close_all(masters);
}

// extend(ttl) of a held lock: a refused one changes nothing on the server.
template <class Lock>
asio::awaitable<void> check_extend(redis::connection& conn, Lock& lock, std::string label) {
  struct extend_case {
    const char* name;
    ms ttl;
    expect outcome;
  };
  co_await lock.acquire();
  for (auto c : {extend_case{"0", ms(0), expect::refused}, extend_case{"-1ms", ms(-1), expect::refused},
                 extend_case{"ms::min", ms::min(), expect::refused},
                 extend_case{"max_duration + 1ms", max_ms + ms(1), expect::refused},
                 extend_case{"ms::max", ms::max(), expect::refused},
                 extend_case{"1 day", std::chrono::hours(24), expect::works}}) {
    auto sent = conn.stats().commands;
    auto [ec] = co_await lock.extend(c.ttl, tuple_token);
    auto pttl = co_await integer_command(conn, redis::command("PTTL", lock.key()));
    if (c.outcome == expect::works) {
      BOOST_CHECK_MESSAGE(!ec, label << " extend " << c.name << ": " << ec.message());
      BOOST_CHECK_GT(pttl, 10'000);
    } else {
      BOOST_CHECK_MESSAGE(ec == dlock::error::invalid_argument && conn.stats().commands == sent + 1,  // the PTTL
                          label << " extend " << c.name << ": not refused at once: " << ec.message());
      BOOST_CHECK_MESSAGE(pttl > 0 && pttl <= 10'000, label << " extend " << c.name << ": PTTL " << pttl);
      BOOST_CHECK(lock.held());
    }
  }
  co_await lock.release();
  BOOST_CHECK(!co_await exists(conn, lock.key()));
}

asio::awaitable<void> extend_ttls(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto& conn = *masters[0];
  redis::lock lock(conn, fresh("extend"));
  co_await check_extend(conn, lock, "lock");
  redis::semaphore lease(conn, fresh("extend"), 1);
  co_await check_extend(conn, lease, "semaphore");
  redis::redlock rl(ex, masters, fresh("extend"));
  co_await check_extend(conn, rl, "redlock");
  close_all(masters);
}

}  // namespace

BOOST_AUTO_TEST_CASE(max_leases_of_the_semaphore) { run(max_leases_domain); }
BOOST_AUTO_TEST_CASE(acquire_for_limits_of_every_lock) { run(acquire_for_limits); }
BOOST_AUTO_TEST_CASE(extend_ttls_of_every_lock) { run(extend_ttls); }

// ------------------------------------------------------------ redlock options and masters

namespace {

struct redlock_case {
  const char* name;
  void (*apply)(redis::redlock_options&);
  expect outcome;
};

#define REDLOCK_CASE(name, body, outcome) \
  redlock_case { name, [](redis::redlock_options& o) { body; }, outcome }

const std::vector<redlock_case>& redlock_cases() {
  using enum expect;
  static const std::vector<redlock_case> cases{
      REDLOCK_CASE("defaults", (void)o, works),
      REDLOCK_CASE("ttl 0", o.ttl = ms(0), refused),
      REDLOCK_CASE("ttl -1ms", o.ttl = ms(-1), refused),
      REDLOCK_CASE("ttl 1ms (not above master_timeout)", o.ttl = ms(1), refused),
      REDLOCK_CASE("ttl 1s", o.ttl = ms(1000), works),
      REDLOCK_CASE("ttl max_duration", o.ttl = max_ms, works),
      REDLOCK_CASE("ttl max_duration + 1ms", o.ttl = max_ms + ms(1), refused),
      REDLOCK_CASE("ttl ms::max", o.ttl = ms::max(), refused),
      REDLOCK_CASE("drift_factor 0", o.drift_factor = 0.0, works),
      REDLOCK_CASE("drift_factor 1", o.drift_factor = 1.0, refused),
      REDLOCK_CASE("drift_factor -0.01", o.drift_factor = -0.01, refused),
      REDLOCK_CASE("drift_factor NaN", o.drift_factor = nan, refused),
      REDLOCK_CASE("drift_factor inf", o.drift_factor = inf, refused),
      REDLOCK_CASE("drift_factor just below 1 (drift above ttl)", o.drift_factor = std::nextafter(1.0, 0.0),
                   refused_elsewhere),
      REDLOCK_CASE("drift_extra 0", o.drift_extra = ms(0), works),
      REDLOCK_CASE("drift_extra -1ms", o.drift_extra = ms(-1), refused),
      REDLOCK_CASE("drift_extra 5s of a 10s ttl", o.drift_extra = ms(5'000), works),
      REDLOCK_CASE("drift_extra = ttl", o.drift_extra = o.ttl, refused_elsewhere),
      REDLOCK_CASE("drift_extra ms::max", o.drift_extra = ms::max(), refused),
      REDLOCK_CASE("master_timeout 0", o.master_timeout = ms(0), refused),
      REDLOCK_CASE("master_timeout -1ms", o.master_timeout = ms(-1), refused),
      REDLOCK_CASE("master_timeout = ttl", o.master_timeout = o.ttl, refused),
      REDLOCK_CASE("master_timeout ttl - 1ms", o.master_timeout = o.ttl - ms(1), works),
      REDLOCK_CASE("master_timeout ms::max", o.master_timeout = ms::max(), refused),
      REDLOCK_CASE("retry_count INT_MIN", o.retry_count = std::numeric_limits<int>::min(), refused),
      REDLOCK_CASE("retry_count -2", o.retry_count = -2, refused),
      REDLOCK_CASE("retry_count -1 without wait_limit", o.retry_count = -1, refused),
      REDLOCK_CASE("retry_count -1 with wait_limit", (o.retry_count = -1, o.wait_limit = ms(1000)), works),
      REDLOCK_CASE("retry_count 0", o.retry_count = 0, works),
      REDLOCK_CASE("retry_count INT_MAX", o.retry_count = std::numeric_limits<int>::max(), works),
      REDLOCK_CASE("retry_delay -1ms", o.retry_delay = ms(-1), refused),
      REDLOCK_CASE("retry_delay 0", o.retry_delay = ms(0), works),
      REDLOCK_CASE("retry_delay ms::max", o.retry_delay = ms::max(), refused),
      REDLOCK_CASE("retry_jitter -1ms", o.retry_jitter = ms(-1), refused),
      REDLOCK_CASE("retry_jitter ms::max", o.retry_jitter = ms::max(), refused),
      REDLOCK_CASE("wait_limit -1ms", o.wait_limit = ms(-1), refused),
      REDLOCK_CASE("wait_limit max_duration", o.wait_limit = max_ms, works),
      REDLOCK_CASE("wait_limit ms::max", o.wait_limit = ms::max(), refused),
      REDLOCK_CASE("auto_extend, extend_fraction 0", (o.auto_extend = true, o.extend_fraction = 0.0), refused),
      REDLOCK_CASE("auto_extend, extend_fraction 1", (o.auto_extend = true, o.extend_fraction = 1.0), refused),
      REDLOCK_CASE("auto_extend, extend_fraction NaN", (o.auto_extend = true, o.extend_fraction = nan), refused),
      REDLOCK_CASE("auto_extend, extend_fraction 0.5", (o.auto_extend = true, o.extend_fraction = 0.5), works),
      // Without auto_extend the fraction is never used: not checked.
      REDLOCK_CASE("extend_fraction NaN without auto_extend", o.extend_fraction = nan, works),
      REDLOCK_CASE("max_hold -1ms", o.max_hold = ms(-1), refused),
      REDLOCK_CASE("max_hold ms::max", o.max_hold = ms::max(), refused),
      REDLOCK_CASE("max_hold 1ms with auto_extend", (o.max_hold = ms(1), o.auto_extend = true), works),
  };
  return cases;
}

asio::awaitable<void> redlock_options_domain(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 3);
  for (const auto& c : redlock_cases()) {
    for (bool fencing : {false, true}) {
      redis::redlock_options o;
      o.fencing = fencing;
      c.apply(o);
      redis::redlock rl(ex, masters, fresh("rl"), o);
      co_await check_redlock(masters, rl, std::string("redlock ") + (fencing ? "(fenced) " : "") + c.name, c.outcome);
    }
  }
  close_all(masters);
}

asio::awaitable<void> redlock_masters_domain(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 5);
  // A second connection to master 0, and one naming it "localhost".
  auto endpoint = dlock::test::redis_masters().at(0);
  redis::options same;
  same.host = "LOCALHOST";
  same.port = endpoint.port;
  auto twin = std::make_shared<redis::connection>(ex, same);
  co_await twin->connect();
  struct master_case {
    const char* name;
    masters_t list;
    expect outcome;
  };
  std::vector<master_case> cases{
      {"no master", {}, expect::refused},
      {"a null master", {masters[0], nullptr, masters[1]}, expect::refused},
      {"one connection twice", {masters[0], masters[1], masters[0]}, expect::refused},
      {"one server twice (LOCALHOST and 127.0.0.1)", {masters[0], masters[1], twin}, expect::refused},
      {"one master", {masters[0]}, expect::works},
      {"two masters (even)", {masters[0], masters[1]}, expect::works},
      {"five masters", masters, expect::works},
  };
  for (auto& c : cases) {
    redis::redlock rl(ex, c.list, fresh("masters"));
    masters_t probe = c.list;
    std::erase(probe, nullptr);
    if (probe.empty()) probe = {masters[0]};
    co_await check_redlock(probe, rl, std::string("redlock masters: ") + c.name, c.outcome);
  }
  twin->close();
  close_all(masters);
}

}  // namespace

BOOST_AUTO_TEST_CASE(options_of_the_redlock) { run(redlock_options_domain); }
BOOST_AUTO_TEST_CASE(masters_of_the_redlock) { run(redlock_masters_domain); }

// ------------------------------------------------------------ fencing tokens up to INT64_MAX

namespace {

// A single lock's token is the counter's INCR, exact up to INT64_MAX; past
// it the INCR fails, and the acquire must fail and leave no key.
asio::awaitable<void> lock_tokens_near_int64_max(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto& conn = *masters[0];
  auto key = fresh("fence-max");
  co_await set_text(conn, key + ":fencing", std::to_string(int64_max - 2));
  redis::lock lock(conn, key, {.fencing = true});
  for (std::int64_t expected : {int64_max - 1, int64_max}) {
    co_await lock.acquire();
    BOOST_CHECK_EQUAL(lock.fencing_token(), expected);
    co_await lock.release();
  }
  auto [ec] = co_await lock.try_acquire(tuple_token);
  BOOST_CHECK_MESSAGE(ec, "a fenced acquire past INT64_MAX succeeded");
  if (!ec) {
    BOOST_CHECK_GT(lock.fencing_token(), 0);  // never a token that went back
    co_await lock.release();
  }
  BOOST_CHECK_MESSAGE(!co_await exists(conn, key), "the key is left after a failed fenced acquire");
  BOOST_CHECK_EQUAL(co_await get_text(conn, key + ":fencing"), std::to_string(int64_max));
  close_all(masters);
}

// Redlock's counters travel as text: through a Lua number INT64_MAX - 1 and
// INT64_MAX - 3 would both round to 2^63.
asio::awaitable<void> redlock_tokens_near_int64_max(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 5);
  auto key = fresh("rl-fence-max");
  for (std::size_t i = 0; i < masters.size(); ++i)
    co_await set_text(*masters[i], key + ":fencing", std::to_string(i < 3 ? int64_max - 1 : int64_max - 4));
  redis::redlock rl(ex, masters, key, {.retry_count = 0, .fencing = true});
  co_await rl.acquire();
  BOOST_CHECK_EQUAL(rl.fencing_token(), int64_max);
  co_await rl.release();
  // Every master the write-back reached holds INT64_MAX exactly, the others
  // their own increment.
  for (std::size_t i = 0; i < masters.size(); ++i) {
    auto counter = co_await get_text(*masters[i], key + ":fencing");
    BOOST_CHECK_MESSAGE(counter == std::to_string(int64_max) || (i >= 3 && counter == std::to_string(int64_max - 3)),
                        "master " << i << ": " << counter);
  }
  // Nothing larger exists: the acquire fails, and leaves no key anywhere.
  auto [ec] = co_await rl.acquire(tuple_token);
  BOOST_CHECK_MESSAGE(ec, "an acquire past INT64_MAX succeeded with token " << rl.fencing_token());
  if (!ec) co_await rl.release();
  for (std::size_t i = 0; i < masters.size(); ++i) {
    BOOST_CHECK_MESSAGE(!co_await exists(*masters[i], key), "master " << i << " keeps the key");
    auto counter = co_await get_text(*masters[i], key + ":fencing");
    BOOST_CHECK_MESSAGE(counter == std::to_string(int64_max) || counter == std::to_string(int64_max - 3) ||
                            counter == std::to_string(int64_max - 2),
                        "master " << i << ": " << counter);
  }
  close_all(masters);
}

// Tokens are compared exactly: 2^53 + 1 is below 2^53 + 2, INT64_MAX - 1
// below INT64_MAX (as doubles, each pair is one value).
asio::awaitable<void> fenced_set_tokens(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto& conn = *masters[0];
  constexpr std::int64_t two53 = std::int64_t(1) << 53;
  struct step {
    std::int64_t token;
    error_code expected;
  };
  auto key = fresh("fenced");
  for (auto s : {step{1, {}}, step{two53 + 2, {}}, step{two53 + 1, dlock::error::stale_token}, step{two53 + 2, {}},
                 step{int64_max - 1, {}}, step{int64_max - 2, dlock::error::stale_token},
                 step{int64_max, {}}, step{int64_max - 1, dlock::error::stale_token}, step{int64_max, {}},
                 step{1, dlock::error::stale_token}}) {
    auto value = "v" + std::to_string(s.token);
    auto before = co_await get_text(conn, key);
    auto [ec] = co_await redis::fenced_set(conn, key, value, s.token, tuple_token);
    BOOST_CHECK_MESSAGE(ec == s.expected, "token " << s.token << ": " << ec.message());
    BOOST_CHECK_EQUAL(co_await get_text(conn, key), s.expected ? before : value);
  }
  BOOST_CHECK_EQUAL(co_await get_text(conn, key + ":fenced_by"), std::to_string(int64_max));
  // Tokens that no lock gives, and an empty key: refused, nothing written.
  auto untouched = fresh("fenced-refused");
  for (std::int64_t token : {std::int64_t(0), std::int64_t(-1), std::numeric_limits<std::int64_t>::min()}) {
    auto sent = conn.stats().commands;
    auto [ec] = co_await redis::fenced_set(conn, untouched, "v", token, tuple_token);
    BOOST_CHECK(ec == dlock::error::invalid_argument && conn.stats().commands == sent);
    auto [ec_e, reply_e] = co_await redis::fenced_eval(conn, redis::fenced_script("return 1"), untouched, token,
                                                       {}, {}, tuple_token);
    BOOST_CHECK(ec_e == dlock::error::invalid_argument && conn.stats().commands == sent);
  }
  auto [ec_k] = co_await redis::fenced_set(conn, "", "v", 1, tuple_token);
  BOOST_CHECK(ec_k == dlock::error::invalid_argument);
  auto [ec_f, reply_f] = co_await redis::fenced_eval(conn, redis::fenced_script("return 1"), "", 1, {}, {}, tuple_token);
  BOOST_CHECK(ec_f == dlock::error::invalid_argument);
  BOOST_CHECK(!co_await exists(conn, untouched));
  BOOST_CHECK(!co_await exists(conn, untouched + ":fenced_by"));
  close_all(masters);
}

// A plain lock whose key is a fenced lock's counter: the two are kept apart.
asio::awaitable<void> counter_key_taken_by_a_lock_single(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto& conn = *masters[0];
  auto key = fresh("fence-clash");
  // The counter exists first: the plain lock finds its key taken.
  {
    redis::lock fenced(conn, key, {.fencing = true});
    co_await fenced.acquire();
    redis::lock plain(conn, key + ":fencing");
    auto [ec] = co_await plain.try_acquire(tuple_token);
    BOOST_CHECK(ec == dlock::error::taken);
    co_await fenced.release();
    BOOST_CHECK_EQUAL(co_await get_text(conn, key + ":fencing"), "1");
  }
  // The plain lock first: the counter holds a token, not an integer. The
  // fenced acquire must fail (issue #31) and leave no key.
  auto key2 = fresh("fence-clash");
  redis::lock plain(conn, key2 + ":fencing");
  co_await plain.acquire();
  redis::lock fenced(conn, key2, {.wait = ms(300), .fencing = true});
  auto [ec] = co_await fenced.try_acquire(tuple_token);
  BOOST_CHECK_MESSAGE(ec, "a fenced acquire over a non-integer counter succeeded");
  if (!ec) co_await fenced.release();
  BOOST_CHECK_MESSAGE(!co_await exists(conn, key2), "the key is left after a failed fenced acquire");
  BOOST_CHECK_EQUAL(co_await get_text(conn, key2 + ":fencing"), plain.token());  // not overwritten
  co_await plain.release();
  close_all(masters);
}

asio::awaitable<void> counter_key_taken_by_a_lock_redlock(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 3);
  auto key = fresh("rl-fence-clash");
  redis::redlock plain(ex, masters, key + ":fencing");
  co_await plain.acquire();
  redis::redlock fenced(ex, masters, key, {.retry_count = 0, .fencing = true});
  auto [ec] = co_await fenced.acquire(tuple_token);
  BOOST_CHECK_MESSAGE(ec, "a fenced Redlock over non-integer counters succeeded");
  if (!ec) co_await fenced.release();
  for (auto& m : masters) {
    BOOST_CHECK(!co_await exists(*m, key));
    BOOST_CHECK_EQUAL(co_await get_text(*m, key + ":fencing"), plain.token());
  }
  co_await plain.release();
  close_all(masters);
}

}  // namespace

BOOST_AUTO_TEST_CASE(lock_fencing_tokens_up_to_int64_max) { run(lock_tokens_near_int64_max); }
BOOST_AUTO_TEST_CASE(redlock_fencing_tokens_up_to_int64_max) { run(redlock_tokens_near_int64_max); }
BOOST_AUTO_TEST_CASE(fenced_set_compares_tokens_exactly) { run(fenced_set_tokens); }
BOOST_AUTO_TEST_CASE(a_lock_on_another_locks_counter_single) { run(counter_key_taken_by_a_lock_single); }
BOOST_AUTO_TEST_CASE(a_lock_on_another_locks_counter_redlock) { run(counter_key_taken_by_a_lock_redlock); }

// ------------------------------------------------------------ commands on a shared connection

namespace {

asio::awaitable<void> shared_connection_commands(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto& conn = *masters[0];
  redis::lock lock(conn, fresh("shared"));
  co_await lock.acquire();
  struct command_case {
    const char* name;
    std::vector<std::string> args;
    expect outcome;
  };
  using enum expect;
  std::vector<command_case> cases{
      {"empty", {}, refused},
      {"MULTI", {"MULTI"}, refused},
      {"multi", {"multi"}, refused},
      {"SUBSCRIBE", {"SUBSCRIBE", "c"}, refused},
      {"PSUBSCRIBE", {"PSUBSCRIBE", "c*"}, refused},
      {"SSUBSCRIBE", {"SSUBSCRIBE", "c"}, refused},
      {"UNSUBSCRIBE", {"UNSUBSCRIBE"}, refused},
      {"MONITOR", {"MONITOR"}, refused},
      {"SYNC", {"SYNC"}, refused},
      {"PSYNC", {"PSYNC", "?", "-1"}, refused},
      {"REPLCONF", {"REPLCONF", "ACK", "0"}, refused},
      {"CLIENT REPLY OFF", {"CLIENT", "REPLY", "OFF"}, refused},
      {"client reply skip", {"client", "reply", "skip"}, refused},
      {"HELLO 3", {"HELLO", "3"}, refused},
      {"RESET", {"RESET"}, refused},
      {"SELECT 1", {"SELECT", "1"}, refused},
      {"select 0", {"select", "0"}, refused},
      {"PING", {"PING"}, works},
      {"HELLO 2", {"HELLO", "2"}, works},
      {"CLIENT ID", {"CLIENT", "ID"}, works},
      {"EXEC without MULTI (an error reply)", {"EXEC"}, works},
      {"a 1 MB argument", {"ECHO", std::string(1024 * 1024, 'x')}, works},
  };
  for (auto& c : cases) {
    auto sent = conn.stats().commands;
    auto op = conn.exec(redis::command(c.args), tuple_token);
    auto [ec, answer] = co_await std::move(op);
    if (c.outcome == refused)
      BOOST_CHECK_MESSAGE(ec == dlock::error::invalid_argument && conn.stats().commands == sent,
                          c.name << ": not refused at once: " << ec.message());
    else
      BOOST_CHECK_MESSAGE(!ec || ec == redis::error::server_error, c.name << ": " << ec.message());
    // The lock on the connection is unaffected: still ours, in database 0.
    auto ext = lock.extend(ms(10'000), tuple_token);
    auto [ec_x] = co_await std::move(ext);
    BOOST_CHECK_MESSAGE(!ec_x, c.name << ": the lock's extension failed after it: " << ec_x.message());
  }
  co_await lock.release();
  BOOST_CHECK(!co_await exists(conn, lock.key()));
  close_all(masters);
}

// redis::options at their edges: refused by connect() at once, or
// connecting (or failing to) as documented.
asio::awaitable<void> connection_options(asio::any_io_executor ex) {
  auto endpoint = dlock::test::redis_masters().at(0);
  redis::options base;
  base.host = endpoint.host;
  base.port = endpoint.port;
  struct option_case {
    const char* name;
    void (*apply)(redis::options&);
    bool connects;
    error_code refused_with;  // when it does not connect: the expected error, empty for any
  };
  std::vector<option_case> cases{
      {"defaults", [](redis::options&) {}, true, {}},
      {"reconnect_min 0", [](redis::options& o) { o.reconnect_min = ms(0); }, false, dlock::error::invalid_argument},
      {"reconnect_min -1ms", [](redis::options& o) { o.reconnect_min = ms(-1); }, false,
       dlock::error::invalid_argument},
      {"reconnect_max below reconnect_min",
       [](redis::options& o) { o.reconnect_min = ms(100), o.reconnect_max = ms(99); }, false,
       dlock::error::invalid_argument},
      {"reconnect_min 0 without reconnect", [](redis::options& o) { o.reconnect_min = ms(0), o.reconnect = false; },
       true, {}},
      {"reconnect_max max_duration", [](redis::options& o) { o.reconnect_max = max_ms; }, true, {}},
      {"reconnect_max ms::max", [](redis::options& o) { o.reconnect_max = ms::max(); }, false,
       dlock::error::invalid_argument},
      {"command_timeout 0 (none)", [](redis::options& o) { o.command_timeout = ms(0); }, true, {}},
      {"command_timeout -1ms", [](redis::options& o) { o.command_timeout = ms(-1); }, false,
       dlock::error::invalid_argument},
      {"command_timeout max_duration", [](redis::options& o) { o.command_timeout = max_ms; }, true, {}},
      {"command_timeout ms::max", [](redis::options& o) { o.command_timeout = ms::max(); }, false,
       dlock::error::invalid_argument},
      {"connect_timeout 0", [](redis::options& o) { o.connect_timeout = ms(0); }, false,
       dlock::error::invalid_argument},
      {"connect_timeout max_duration", [](redis::options& o) { o.connect_timeout = max_ms; }, true, {}},
      {"connect_timeout ms::max", [](redis::options& o) { o.connect_timeout = ms::max(); }, false,
       dlock::error::invalid_argument},
      {"database 15", [](redis::options& o) { o.database = 15; }, true, {}},
      {"database -1", [](redis::options& o) { o.database = -1; }, false, dlock::error::invalid_argument},
      {"database INT_MAX", [](redis::options& o) { o.database = std::numeric_limits<int>::max(); }, false, {}},
      {"client_name with a space", [](redis::options& o) { o.client_name = "a b"; }, false, {}},
      {"client_name of 1 KB", [](redis::options& o) { o.client_name = std::string(1024, 'n'); }, true, {}},
      {"port 0", [](redis::options& o) { o.port = 0; }, false, {}},
      {"host empty", [](redis::options& o) { o.host.clear(); }, false, dlock::error::invalid_argument},
  };
  for (auto& c : cases) {
    auto o = base;
    c.apply(o);
    redis::connection conn(ex, o);
    auto [ec] = co_await conn.connect(tuple_token);
    if (c.connects) {
      BOOST_CHECK_MESSAGE(!ec, c.name << ": " << ec.message());
      if (!ec) {
        redis::lock lock(conn, fresh("conn-opt"));
        auto [ec_l] = co_await lock.acquire(tuple_token);
        BOOST_CHECK_MESSAGE(!ec_l, c.name << ": a lock on it: " << ec_l.message());
        if (!ec_l) co_await lock.release();
      }
    } else {
      BOOST_CHECK_MESSAGE(ec, c.name << ": connected");
      if (c.refused_with) BOOST_CHECK_MESSAGE(ec == c.refused_with, c.name << ": " << ec.message());
    }
    conn.close();
  }
}

// stall_options: the monitor has no operation to refuse, so it takes every
// value brought into range (a period of 0 would rearm its timer without
// pause, ms::max overflow the clock). Each one runs, and a lock on a
// connection that uses it works.
asio::awaitable<void> stall_options_in_range(asio::any_io_executor ex) {
  struct stall_case {
    const char* name;
    void (*apply)(dlock::stall_options&);
  };
  std::vector<stall_case> cases{
      {"period 0", [](dlock::stall_options& o) { o.period = ms(0); }},
      {"period -1ms", [](dlock::stall_options& o) { o.period = ms(-1); }},
      {"period ms::max", [](dlock::stall_options& o) { o.period = ms::max(); }},
      {"threshold 0", [](dlock::stall_options& o) { o.threshold = ms(0); }},
      {"threshold ms::min", [](dlock::stall_options& o) { o.threshold = ms::min(); }},
      {"threshold ms::max", [](dlock::stall_options& o) { o.threshold = ms::max(); }},
      {"memory -1ms", [](dlock::stall_options& o) { o.memory = ms(-1); }},
      {"memory ms::max", [](dlock::stall_options& o) { o.memory = ms::max(); }},
  };
  auto endpoint = dlock::test::redis_masters().at(0);
  for (auto& c : cases) {
    dlock::stall_options so;
    c.apply(so);
    auto monitor = std::make_shared<dlock::stall_monitor>(ex, so);
    redis::options o;
    o.host = endpoint.host;
    o.port = endpoint.port;
    o.stall = monitor;
    redis::connection conn(ex, o);
    co_await conn.connect();
    redis::lock lock(conn, fresh("stall-opt"));
    auto [ec] = co_await lock.acquire(tuple_token);
    BOOST_CHECK_MESSAGE(!ec, c.name << ": " << ec.message());
    co_await sleep_for(30ms);
    (void)monitor->margin();  // reads `memory` back from the clock
    if (!ec) co_await lock.release();
    conn.close();
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(stall_options_are_taken_in_range) { run(stall_options_in_range); }
BOOST_AUTO_TEST_CASE(commands_on_a_connection_locks_share) { run(shared_connection_commands); }
BOOST_AUTO_TEST_CASE(options_of_the_connection) { run(connection_options); }
