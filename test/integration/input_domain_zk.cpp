// The domain of every input of the ZooKeeper side (issue #31, "What to
// build", item 5): every public option and argument at its edges and
// beyond. Each one is either accepted and works, or refused at once with
// dlock::error::invalid_argument: nothing sent (the client's request counter
// does not move) and nothing on the server (not even a parent node).
// RELIABILITY.md, "What is refused, and why", lists the refusals.
//
// Inventory (what each table below covers):
//   paths of every recipe and of the client     path_cases: ZooKeeper's own rules (PathUtils.validatePath:
//                                               controls, surrogates, private use, U+FFF0-U+FFFF,
//                                               ".", ".."), bad UTF-8, lengths up to zk::max_path_size
//   zk::lock_options / semaphore_options        lock_option_cases: identifier, policy, retry,
//                                               restart_after_expiry, stall_fraction
//   election_options                            election_options_domain
//   acquire_for(limit)                          limit_cases (mutex, reader, writer, simple_lock, semaphore)
//   semaphore max_leases, acquire(n), release(k) semaphore_counts
//   queue_options::max_item_size, items         queue_items
//   zk::options (connect)                       client_options
//   node data against jute.maxbuffer            node_data_sizes
#include "common/servers.hpp"
#include "common/zk.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/error.hpp>
#include <dlock/limits.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/error.hpp>
#include <dlock/zk/leader_election.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/path.hpp>
#include <dlock/zk/queue.hpp>
#include <dlock/zk/semaphore.hpp>
#include <dlock/zk/shared_mutex.hpp>
#include <dlock/zk/simple_lock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace asio = boost::asio;
namespace zk = dlock::zk;
using dlock::error_code;
using dlock::test::with_ec;
using ms = std::chrono::milliseconds;
using namespace std::chrono_literals;

namespace {

// works: accepted and does what it says. refused: invalid_argument at once,
// nothing sent, nothing left. server_refuses: sent, and the server refuses
// it (its own limit, which the caller raised dlock's past): the operation
// fails, nothing is left, and the session carries on.
enum class expect { works, refused, server_refuses };

zk::options options() { return dlock::test::zk_options(dlock::test::zk_hosts()); }

// A fresh folder per case: what a refused case must not have created.
std::string fresh_base(const char* what) { return "/dlock-test/domain/" + dlock::test::unique_name(what); }

asio::awaitable<bool> node_exists(zk::client& c, std::string path) {
  auto [ec, st] = co_await c.exists(path, with_ec);
  co_return !ec && st.has_value();
}

asio::awaitable<std::size_t> children_count(zk::client& c, std::string path) {
  auto [ec, children, st] = co_await c.get_children(path, with_ec);
  co_return ec ? 0 : children.size();
}

// ------------------------------------------------------------ paths

struct path_case {
  const char* name;
  std::string (*below)(const std::string& base);  // the path, given a fresh base folder
  expect outcome;
  bool recipes_only = false;  // a bound of the recipes: the client's create accepts it
  bool semaphore_refuses = false;  // its children's lock path would be over the bound
};

const std::vector<path_case>& path_cases() {
  using enum expect;
  static const std::vector<path_case> cases{
      {"empty", [](const std::string&) { return std::string(); }, refused},
      {"relative", [](const std::string& b) { return b.substr(1); }, refused},
      {"root", [](const std::string&) { return std::string("/"); }, refused},
      {"trailing /", [](const std::string& b) { return b + "/"; }, refused},
      {"empty component", [](const std::string& b) { return b + "//x"; }, refused},
      {". component", [](const std::string& b) { return b + "/./x"; }, refused},
      {".. component", [](const std::string& b) { return b + "/.."; }, refused},
      {"NUL", [](const std::string& b) { return b + std::string("/a\0b", 4); }, refused},
      {"control U+0001", [](const std::string& b) { return b + "/a\x01"; }, refused},
      {"DEL", [](const std::string& b) { return b + "/a\x7f"; }, refused},
      {"C1 control U+0085", [](const std::string& b) { return b + "/a\xc2\x85"; }, refused},
      {"private use U+E000", [](const std::string& b) { return b + "/a\xee\x80\x80"; }, refused},
      {"U+FFFF", [](const std::string& b) { return b + "/a\xef\xbf\xbf"; }, refused},
      {"beyond U+FFFF (a surrogate pair in Java)", [](const std::string& b) { return b + "/a\xf0\x9f\x98\x80"; },
       refused},
      {"invalid UTF-8 byte", [](const std::string& b) { return b + "/a\xff"; }, refused},
      {"overlong UTF-8", [](const std::string& b) { return b + "/a\xc0\xaf"; }, refused},
      {"truncated UTF-8", [](const std::string& b) { return b + "/a\xe6\x97"; }, refused},
      {"longer than max_path_size",
       [](const std::string& b) { return b + "/" + std::string(zk::max_path_size, 'p'); }, refused, true},
      {"plain", [](const std::string& b) { return b + "/lock"; }, works},
      {"spaces", [](const std::string& b) { return b + "/a lock"; }, works},
      {"UTF-8 (Latin, CJK)", [](const std::string& b) { return b + "/ünïcødé-日本"; }, works},
      {"dots that are not . or ..", [](const std::string& b) { return b + "/.../a.b/..c"; }, works},
      {"U+FFEF (below the refused range)", [](const std::string& b) { return b + "/a\xef\xbf\xaf"; }, works},
      {"a 1000-byte component", [](const std::string& b) { return b + "/" + std::string(1000, 'c'); }, works},
      {"max_path_size exactly",
       [](const std::string& b) { return b + "/" + std::string(zk::max_path_size - b.size() - 1, 'p'); }, works,
       false, true},
      {"max_path_size - 7 (the semaphore's bound)",
       [](const std::string& b) { return b + "/" + std::string(zk::max_path_size - 7 - b.size() - 1, 'p'); }, works},
  };
  return cases;
}

// Runs one recipe on `path`: refused (invalid_argument, nothing sent,
// nothing under `base`), or works (acquired or done, then released).
struct recipe_run {
  error_code ec;
  bool cleaned = true;  // released / resigned without error
};

asio::awaitable<recipe_run> run_mutex(zk::client& c, std::string path) {
  zk::mutex m(c, path);
  auto [ec] = co_await m.try_acquire(with_ec);
  recipe_run r{ec};
  if (!ec) r.cleaned = !std::get<0>(co_await m.release(with_ec));
  co_return r;
}

asio::awaitable<recipe_run> run_reader_writer(zk::client& c, std::string path) {
  zk::shared_mutex rw(c, path);
  auto [ec] = co_await rw.reader().try_acquire(with_ec);
  recipe_run r{ec};
  if (!ec) r.cleaned = !std::get<0>(co_await rw.reader().release(with_ec));
  auto [ec_w] = co_await rw.writer().try_acquire(with_ec);
  if (ec_w != ec) r.ec = ec_w ? ec_w : ec;  // both refused, or both work
  if (!ec_w) r.cleaned = r.cleaned && !std::get<0>(co_await rw.writer().release(with_ec));
  co_return r;
}

asio::awaitable<recipe_run> run_simple_lock(zk::client& c, std::string path) {
  zk::simple_lock l(c, path);
  auto [ec] = co_await l.try_acquire(with_ec);
  recipe_run r{ec};
  if (!ec) r.cleaned = !std::get<0>(co_await l.release(with_ec));
  co_return r;
}

asio::awaitable<recipe_run> run_semaphore(zk::client& c, std::string path) {
  zk::semaphore s(c, path, 2);
  auto [ec] = co_await s.try_acquire(with_ec);
  recipe_run r{ec};
  if (!ec) r.cleaned = !std::get<0>(co_await s.release(with_ec));
  co_return r;
}

asio::awaitable<recipe_run> run_election(zk::client& c, std::string path) {
  zk::leader_election e(c, path);
  auto [ec] = co_await e.campaign("candidate", with_ec);
  recipe_run r{ec};
  if (!ec) r.cleaned = !std::get<0>(co_await e.resign(with_ec));
  co_return r;
}

asio::awaitable<recipe_run> run_queue(zk::client& c, std::string path) {
  zk::queue q(c, path);
  auto [ec, item_path] = co_await q.offer("item", with_ec);
  recipe_run r{ec};
  if (!ec) {
    auto [ec_t, item] = co_await q.poll(with_ec);
    r.cleaned = !ec_t && item == "item";
  }
  co_return r;
}

asio::awaitable<recipe_run> run_create(zk::client& c, std::string path) {
  // The parents first (a lock creates its own; the client does not).
  auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0 && !zk::validate_path(path)) {
    std::string parent;
    for (std::size_t at = path.find('/', 1); at != std::string::npos && at <= slash; at = path.find('/', at + 1))
      co_await c.create(path.substr(0, at), "", zk::create_mode::persistent, with_ec);
  }
  auto [ec, made] = co_await c.create(path, "data", zk::create_mode::ephemeral, with_ec);
  recipe_run r{ec};
  if (!ec) r.cleaned = !std::get<0>(co_await c.remove(made.path, -1, with_ec));
  co_return r;
}

struct recipe {
  const char* name;
  asio::awaitable<recipe_run> (*run)(zk::client&, std::string);
  bool root_allowed;  // the client's create refuses "/" because it exists, not as an argument
};

const recipe recipes[] = {
    {"mutex", run_mutex, false},          {"shared_mutex", run_reader_writer, false},
    {"simple_lock", run_simple_lock, false}, {"semaphore", run_semaphore, false},
    {"leader_election", run_election, false}, {"queue", run_queue, false},
    {"client create", run_create, true},
};

asio::awaitable<void> paths_of_every_recipe() {
  zk::client c(co_await asio::this_coro::executor, options());
  co_await c.connect();
  for (const auto& r : recipes) {
    for (const auto& p : path_cases()) {
      auto base = fresh_base("path");
      auto path = p.below(base);
      std::string label = std::string(r.name) + " path " + p.name;
      auto sent = c.stats().requests_sent;
      auto run = co_await r.run(c, path);
      auto outcome = p.semaphore_refuses && r.run == run_semaphore ? expect::refused : p.outcome;
      if (outcome == expect::works) {
        BOOST_CHECK_MESSAGE(!run.ec, label << ": " << run.ec.message());
        BOOST_CHECK_MESSAGE(run.cleaned, label << ": not released");
      } else if (p.recipes_only && r.root_allowed) {
        BOOST_CHECK_MESSAGE(!run.ec, label << ": " << run.ec.message());
      } else if (path == "/" && r.root_allowed) {
        BOOST_CHECK_MESSAGE(run.ec == zk::error::node_exists, label << ": " << run.ec.message());
      } else {
        BOOST_CHECK_MESSAGE(run.ec == dlock::error::invalid_argument && c.stats().requests_sent == sent,
                            label << ": not refused at once: " << run.ec.message() << " (path \""
                                  << path.substr(0, 80) << "\")");
        BOOST_CHECK_MESSAGE(!co_await node_exists(c, base), label << ": " << base << " was created");
      }
      co_await dlock::test::delete_tree(c, base);
    }
  }
  co_await c.close();
}

}  // namespace

BOOST_AUTO_TEST_CASE(paths_of_every_recipe_and_the_client) { dlock::test::run(paths_of_every_recipe()); }

// ------------------------------------------------------------ lock options

namespace {

struct lock_option_case {
  const char* name;
  void (*apply)(zk::lock_options&);
  void (*apply_semaphore)(zk::semaphore_options&);  // null: not a semaphore option
  expect outcome;
};

#define LOCK_CASE(name, body, outcome) \
  lock_option_case { name, [](zk::lock_options& o) { body; }, [](zk::semaphore_options& o) { body; }, outcome }
#define LOCK_ONLY_CASE(name, body, outcome) \
  lock_option_case { name, [](zk::lock_options& o) { body; }, nullptr, outcome }

const std::vector<lock_option_case>& lock_option_cases() {
  using enum expect;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  static const std::vector<lock_option_case> cases{
      LOCK_CASE("defaults", (void)o, works),
      LOCK_CASE("identifier of one byte", o.identifier = "x", works),
      LOCK_CASE("identifier with NUL and newlines", o.identifier = std::string("a\0b\n\r", 5), works),
      LOCK_CASE("identifier of max_identifier_size", o.identifier = std::string(zk::max_identifier_size, 'i'), works),
      LOCK_CASE("identifier of max_identifier_size + 1", o.identifier = std::string(zk::max_identifier_size + 1, 'i'),
                refused),
      LOCK_CASE("identifier of 1 MiB (over jute.maxbuffer with the path)",
                o.identifier = std::string(1024 * 1024, 'i'), refused),
      LOCK_CASE("policy session", o.policy = zk::loss_policy::session, works),
      LOCK_CASE("retry.max_attempts 0", o.retry.max_attempts = 0, works),
      LOCK_CASE("retry.max_attempts -1", o.retry.max_attempts = -1, refused),
      LOCK_CASE("retry.max_attempts INT_MIN", o.retry.max_attempts = std::numeric_limits<int>::min(), refused),
      LOCK_CASE("retry.max_attempts INT_MAX", o.retry.max_attempts = std::numeric_limits<int>::max(), works),
      LOCK_CASE("retry.initial_backoff 0", o.retry.initial_backoff = ms(0), works),
      LOCK_CASE("retry.initial_backoff -1ms", o.retry.initial_backoff = ms(-1), refused),
      LOCK_CASE("retry.initial_backoff ms::max", o.retry.initial_backoff = ms::max(), refused),
      LOCK_CASE("retry.max_backoff below initial_backoff", o.retry.max_backoff = ms(1), works),
      LOCK_CASE("retry.max_backoff max_duration", o.retry.max_backoff = dlock::max_duration, works),
      LOCK_CASE("retry.max_backoff ms::max", o.retry.max_backoff = ms::max(), refused),
      LOCK_ONLY_CASE("restart_after_expiry", o.restart_after_expiry = true, works),
      LOCK_CASE("stall_fraction 1e-9", o.stall_fraction = 1e-9, works),
      LOCK_CASE("stall_fraction 1", o.stall_fraction = 1.0, works),
      LOCK_CASE("stall_fraction 0", o.stall_fraction = 0.0, refused),
      LOCK_CASE("stall_fraction -0.5", o.stall_fraction = -0.5, refused),
      LOCK_CASE("stall_fraction 1.5", o.stall_fraction = 1.5, refused),
      LOCK_CASE("stall_fraction NaN", o.stall_fraction = nan, refused),
      LOCK_CASE("stall_fraction inf", o.stall_fraction = std::numeric_limits<double>::infinity(), refused),
  };
  return cases;
}

template <class Lock>
asio::awaitable<void> check_lock(zk::client& c, Lock& lock, std::string base, std::string label, expect outcome) {
  auto sent = c.stats().requests_sent;
  auto [ec] = co_await lock.try_acquire(with_ec);
  if (outcome == expect::works) {
    BOOST_CHECK_MESSAGE(!ec, label << ": " << ec.message());
    if (!ec) {
      auto [ec_r] = co_await lock.release(with_ec);
      BOOST_CHECK_MESSAGE(!ec_r, label << ": release: " << ec_r.message());
    }
  } else {
    auto [ec_a] = co_await lock.acquire(with_ec);
    auto [ec_f] = co_await lock.acquire_for(100ms, with_ec);
    BOOST_CHECK_MESSAGE(ec == dlock::error::invalid_argument && ec_a == dlock::error::invalid_argument &&
                            ec_f == dlock::error::invalid_argument && c.stats().requests_sent == sent,
                        label << ": not refused at once: " << ec.message() << " / " << ec_a.message() << " / "
                              << ec_f.message());
    BOOST_CHECK_MESSAGE(!co_await node_exists(c, base), label << ": " << base << " was created");
  }
  co_await dlock::test::delete_tree(c, base);
}

asio::awaitable<void> lock_options_domain() {
  zk::client c(co_await asio::this_coro::executor, options());
  co_await c.connect();
  for (const auto& oc : lock_option_cases()) {
    zk::lock_options lo;
    oc.apply(lo);
    {
      auto base = fresh_base("opt");
      zk::mutex m(c, base + "/mutex", lo);
      co_await check_lock(c, m, base, std::string("mutex ") + oc.name, oc.outcome);
    }
    {
      auto base = fresh_base("opt");
      zk::shared_mutex rw(c, base + "/rw", lo);
      co_await check_lock(c, rw.writer(), base, std::string("writer ") + oc.name, oc.outcome);
    }
    {
      auto base = fresh_base("opt");
      zk::simple_lock l(c, base + "/simple", lo);
      co_await check_lock(c, l, base, std::string("simple_lock ") + oc.name, oc.outcome);
    }
    if (oc.apply_semaphore) {
      zk::semaphore_options so;
      oc.apply_semaphore(so);
      auto base = fresh_base("opt");
      zk::semaphore s(c, base + "/sem", 3, so);
      co_await check_lock(c, s, base, std::string("semaphore ") + oc.name, oc.outcome);
    }
  }
  co_await c.close();
}

// The election takes the lock's retry and policy, and its identifier as
// campaign()'s argument.
asio::awaitable<void> election_options_domain() {
  zk::client c(co_await asio::this_coro::executor, options());
  co_await c.connect();
  struct election_case {
    const char* name;
    zk::election_options options;
    std::string id;
    expect outcome;
  };
  zk::election_options bad_retry;
  bad_retry.retry.max_attempts = -1;
  zk::election_options bad_backoff;
  bad_backoff.retry.initial_backoff = ms::max();
  std::vector<election_case> cases{
      {"defaults", {}, "candidate", expect::works},
      {"empty id (host:pid)", {}, "", expect::works},
      {"id of max_identifier_size", {}, std::string(zk::max_identifier_size, 'i'), expect::works},
      {"id of max_identifier_size + 1", {}, std::string(zk::max_identifier_size + 1, 'i'), expect::refused},
      {"retry.max_attempts -1", bad_retry, "candidate", expect::refused},
      {"retry.initial_backoff ms::max", bad_backoff, "candidate", expect::refused},
  };
  for (auto& ec_case : cases) {
    auto base = fresh_base("election");
    zk::leader_election e(c, base + "/e", ec_case.options);
    auto sent = c.stats().requests_sent;
    auto [ec] = co_await e.campaign(ec_case.id, with_ec);
    if (ec_case.outcome == expect::works) {
      BOOST_CHECK_MESSAGE(!ec, ec_case.name << ": " << ec.message());
      if (!ec) co_await e.resign();
    } else {
      BOOST_CHECK_MESSAGE(ec == dlock::error::invalid_argument && c.stats().requests_sent == sent,
                          ec_case.name << ": not refused at once: " << ec.message());
      BOOST_CHECK(!co_await node_exists(c, base));
    }
    co_await dlock::test::delete_tree(c, base);
  }
  co_await c.close();
}

}  // namespace

BOOST_AUTO_TEST_CASE(lock_and_semaphore_options) { dlock::test::run(lock_options_domain()); }
BOOST_AUTO_TEST_CASE(election_options_and_identifiers) { dlock::test::run(election_options_domain()); }

// ------------------------------------------------------------ limits and counts

namespace {

struct limit_case {
  const char* name;
  std::chrono::steady_clock::duration limit;
  expect outcome;
};

// ZooKeeper's waits are timers (Asio saturates their deadline), so any
// positive limit works.
const std::vector<limit_case>& limit_cases() {
  using enum expect;
  using std::chrono::steady_clock;
  static const std::vector<limit_case> cases{
      {"0", steady_clock::duration::zero(), refused},
      {"-1ns", std::chrono::nanoseconds(-1), refused},
      {"duration::min", steady_clock::duration::min(), refused},
      {"1ns", std::chrono::nanoseconds(1), works},
      {"max_duration", dlock::max_duration, works},
      {"duration::max", steady_clock::duration::max(), works},
  };
  return cases;
}

template <class Lock>
asio::awaitable<void> check_limit(zk::client& c, Lock& lock, std::string base, std::string label,
                                  const limit_case& lc) {
  auto sent = c.stats().requests_sent;
  auto [ec] = co_await lock.acquire_for(lc.limit, with_ec);
  if (lc.outcome == expect::works) {
    // 1ns may run out before the node is created: timed_out, nothing left.
    BOOST_CHECK_MESSAGE(!ec || ec == dlock::error::timed_out, label << ": " << ec.message());
    if (!ec) co_await lock.release();
  } else {
    BOOST_CHECK_MESSAGE(ec == dlock::error::invalid_argument && c.stats().requests_sent == sent,
                        label << ": not refused at once: " << ec.message());
  }
  // What a failed acquire must not leave: a lock's node, a semaphore's lease.
  std::string holders = std::is_same_v<Lock, zk::semaphore> ? base + "/l/leases" : base + "/l";
  auto left = co_await children_count(c, holders);
  BOOST_CHECK_MESSAGE(left == 0 || !ec, label << ": a node is left");
  co_await dlock::test::delete_tree(c, base);
}

asio::awaitable<void> acquire_for_limits() {
  zk::client c(co_await asio::this_coro::executor, options());
  co_await c.connect();
  for (const auto& lc : limit_cases()) {
    {
      auto base = fresh_base("limit");
      zk::mutex m(c, base + "/l");
      co_await check_limit(c, m, base, std::string("mutex acquire_for ") + lc.name, lc);
    }
    {
      auto base = fresh_base("limit");
      zk::shared_mutex rw(c, base + "/l");
      co_await check_limit(c, rw.reader(), base, std::string("reader acquire_for ") + lc.name, lc);
    }
    {
      auto base = fresh_base("limit");
      zk::simple_lock l(c, base + "/l");
      co_await check_limit(c, l, base, std::string("simple_lock acquire_for ") + lc.name, lc);
    }
    {
      auto base = fresh_base("limit");
      zk::semaphore s(c, base + "/l", 1);
      co_await check_limit(c, s, base, std::string("semaphore acquire_for ") + lc.name, lc);
    }
  }
  co_await c.close();
}

asio::awaitable<void> semaphore_counts() {
  zk::client c(co_await asio::this_coro::executor, options());
  co_await c.connect();
  constexpr auto size_max = std::numeric_limits<std::size_t>::max();
  // max_leases
  for (std::size_t max : {std::size_t(0), std::size_t(1), size_max}) {
    auto base = fresh_base("sem");
    zk::semaphore s(c, base + "/s", max);
    co_await check_lock(c, s, base, "max_leases " + std::to_string(max), max == 0 ? expect::refused : expect::works);
  }
  // acquire(n), release(k)
  auto base = fresh_base("sem");
  zk::semaphore s(c, base + "/s", 3);
  auto refused_at_once = [&c](error_code ec, std::uint64_t sent) {
    return ec == dlock::error::invalid_argument && c.stats().requests_sent == sent;
  };
  auto sent = c.stats().requests_sent;
  auto [ec0] = co_await s.try_acquire(0, with_ec);
  BOOST_CHECK(refused_at_once(ec0, sent));
  auto [ec4] = co_await s.acquire_for(4, 1s, with_ec);
  BOOST_CHECK(refused_at_once(ec4, sent));
  auto [ecmax] = co_await s.try_acquire(size_max, with_ec);
  BOOST_CHECK(refused_at_once(ecmax, sent));
  BOOST_CHECK(!co_await node_exists(c, base));
  co_await s.acquire(3);
  BOOST_CHECK_EQUAL(s.leases(), 3u);
  sent = c.stats().requests_sent;
  auto [ec_r0] = co_await s.release(0, with_ec);
  BOOST_CHECK(refused_at_once(ec_r0, sent));
  auto [ec_r4] = co_await s.release(4, with_ec);
  BOOST_CHECK(refused_at_once(ec_r4, sent));
  BOOST_CHECK_EQUAL(s.leases(), 3u);
  co_await s.release(3);
  BOOST_CHECK_EQUAL(co_await children_count(c, base + "/s/leases"), 0u);
  co_await dlock::test::delete_tree(c, base);
  // A holder of one lease of SIZE_MAX asking for SIZE_MAX more: held + n
  // would wrap to 0 (and create leases without end); already_held instead.
  auto big = fresh_base("sem");
  zk::semaphore huge(c, big + "/s", size_max);
  co_await huge.acquire(1);
  sent = c.stats().requests_sent;
  auto [ec_wrap] = co_await huge.try_acquire(size_max, with_ec);
  BOOST_CHECK_MESSAGE(ec_wrap == dlock::error::already_held && c.stats().requests_sent == sent, ec_wrap.message());
  co_await huge.release();
  BOOST_CHECK_EQUAL(co_await children_count(c, big + "/s/leases"), 0u);
  co_await dlock::test::delete_tree(c, big);
  co_await c.close();
}

}  // namespace

BOOST_AUTO_TEST_CASE(acquire_for_limits_of_every_lock) { dlock::test::run(acquire_for_limits()); }
BOOST_AUTO_TEST_CASE(semaphore_counts_and_wraparound) { dlock::test::run(semaphore_counts()); }

// ------------------------------------------------------------ queue items, node data, client options

namespace {

asio::awaitable<void> queue_items() {
  zk::client c(co_await asio::this_coro::executor, options());
  co_await c.connect();
  struct item_case {
    const char* name;
    std::size_t max_item_size;
    std::string item;
    expect outcome;
  };
  const std::size_t default_max = zk::queue_options{}.max_item_size;
  std::vector<item_case> cases{
      {"empty item", default_max, "", expect::works},
      {"binary item", default_max, std::string("\0\xff\r\n", 4), expect::works},
      {"item of the default max_item_size", default_max, std::string(default_max, 'q'), expect::works},
      {"one byte over max_item_size", default_max, std::string(default_max + 1, 'q'), expect::refused},
      {"max_item_size 0, empty item", 0, "", expect::works},
      {"max_item_size 0, one byte", 0, "q", expect::refused},
      {"max_item_size raised to 2 MiB, an item over jute.maxbuffer", 2 * 1024 * 1024,
       std::string(1024 * 1024 + 1, 'q'), expect::server_refuses},
  };
  for (auto& ic : cases) {
    auto base = fresh_base("queue");
    zk::queue_options qo;
    qo.max_item_size = ic.max_item_size;
    zk::queue q(c, base + "/q", qo);
    auto sent = c.stats().requests_sent;
    auto [ec, made] = co_await q.offer(ic.item, with_ec);
    if (ic.outcome == expect::works) {
      BOOST_CHECK_MESSAGE(!ec, ic.name << ": " << ec.message());
      auto [ec_p, item] = co_await q.poll(with_ec);
      BOOST_CHECK_MESSAGE(!ec_p && item == ic.item, ic.name << ": the item did not come back");
    } else if (ic.outcome == expect::server_refuses) {
      BOOST_CHECK_MESSAGE(ec, ic.name << ": the server took it");
      BOOST_TEST_MESSAGE(ic.name << ": " << ec.message());
      auto [ec_c] = co_await c.connect(with_ec);  // back once it reconnected
      BOOST_CHECK_MESSAGE(!ec_c, ec_c.message());
      auto [ec_s, size] = co_await q.size(with_ec);
      BOOST_CHECK_MESSAGE(!ec_s && size == 0, ic.name << ": an item is left");
    } else {
      BOOST_CHECK_MESSAGE(ec == dlock::error::invalid_argument && c.stats().requests_sent == sent,
                          ic.name << ": not refused at once: " << ec.message());
      BOOST_CHECK(!co_await node_exists(c, base));
    }
    if (ic.outcome != expect::server_refuses)
      BOOST_CHECK_MESSAGE(c.state() == zk::session_state::connected, ic.name << ": the session was disturbed");
    co_await dlock::test::delete_tree(c, base);
  }
  // take_for's limit
  auto base = fresh_base("queue");
  zk::queue q(c, base + "/q");
  auto [ec0, none] = co_await q.take_for(0s, with_ec);
  BOOST_CHECK_MESSAGE(ec0 == dlock::error::invalid_argument || ec0 == dlock::error::timed_out, ec0.message());
  co_await q.offer("x");
  auto [ec_max, got] = co_await q.take_for(std::chrono::steady_clock::duration::max(), with_ec);
  BOOST_CHECK_MESSAGE(!ec_max && got == "x", ec_max.message());
  co_await dlock::test::delete_tree(c, base);
  co_await c.close();
}

// The client's own create: the servers' packet limit (jute.maxbuffer, 1 MiB
// - 1 here) is theirs to enforce. Data that fits works; a request over it
// fails (the server drops the connection), creates nothing, and the session
// carries on (it reconnects).
asio::awaitable<void> node_data_sizes() {
  zk::client c(co_await asio::this_coro::executor, options());
  co_await c.connect();
  auto base = fresh_base("data");
  co_await c.create(base.substr(0, base.rfind('/')), "", zk::create_mode::persistent, with_ec);
  const std::size_t fits = 1024 * 1024 - 1024 - base.size();
  for (std::size_t size : {std::size_t(0), std::size_t(1), fits}) {
    auto [ec, made] = co_await c.create(base, std::string(size, 'd'), zk::create_mode::ephemeral, with_ec);
    BOOST_CHECK_MESSAGE(!ec, size << " bytes: " << ec.message());
    if (!ec) co_await c.remove(made.path);
  }
  auto [ec, made] = co_await c.create(base, std::string(1024 * 1024 + 1, 'd'), zk::create_mode::ephemeral, with_ec);
  BOOST_CHECK_MESSAGE(ec, "a create over jute.maxbuffer succeeded");
  BOOST_TEST_MESSAGE("a create over jute.maxbuffer: " << ec.message());
  auto [ec_c] = co_await c.connect(with_ec);  // back once it reconnected
  BOOST_CHECK_MESSAGE(!ec_c, ec_c.message());
  BOOST_CHECK(!co_await node_exists(c, base));
  co_await c.close();
}

asio::awaitable<void> client_options() {
  auto ex = co_await asio::this_coro::executor;
  struct option_case {
    const char* name;
    void (*apply)(zk::options&);
    expect outcome;
  };
  std::vector<option_case> cases{
      {"defaults", [](zk::options&) {}, expect::works},
      {"session_timeout 500ms (the servers may raise it)", [](zk::options& o) { o.session_timeout = 500ms; },
       expect::works},
      {"session_timeout 1ms (no handshake is that fast)", [](zk::options& o) { o.session_timeout = 1ms; },
       expect::refused},
      {"session_timeout below min_session_timeout",
       [](zk::options& o) { o.session_timeout = zk::min_session_timeout - 1ms; }, expect::refused},
      {"session_timeout max_session_timeout (the servers lower it)",
       [](zk::options& o) { o.session_timeout = zk::max_session_timeout; }, expect::works},
      {"session_timeout max_session_timeout + 1ms (2 x overflows the C client's int)",
       [](zk::options& o) { o.session_timeout = zk::max_session_timeout + 1ms; }, expect::refused},
      {"session_timeout INT_MAX ms", [](zk::options& o) { o.session_timeout = ms(std::numeric_limits<int>::max()); },
       expect::refused},
      {"session_timeout 0", [](zk::options& o) { o.session_timeout = 0ms; }, expect::refused},
      {"session_timeout -1ms", [](zk::options& o) { o.session_timeout = -1ms; }, expect::refused},
      {"session_timeout INT_MAX + 1 ms (wraps in the C client's int)",
       [](zk::options& o) { o.session_timeout = ms(std::int64_t(std::numeric_limits<int>::max()) + 1); },
       expect::refused},
      {"session_timeout ms::max", [](zk::options& o) { o.session_timeout = ms::max(); }, expect::refused},
      {"connect_timeout 0", [](zk::options& o) { o.connect_timeout = 0ms; }, expect::refused},
      {"connect_timeout max_duration", [](zk::options& o) { o.connect_timeout = dlock::max_duration; },
       expect::works},
      {"connect_timeout ms::max", [](zk::options& o) { o.connect_timeout = ms::max(); }, expect::refused},
      {"hosts empty", [](zk::options& o) { o.hosts.clear(); }, expect::refused},
  };
  for (auto& oc : cases) {
    auto o = options();
    oc.apply(o);
    zk::client c(ex, o);
    auto [ec] = co_await c.connect(with_ec);
    if (oc.outcome == expect::works) {
      BOOST_CHECK_MESSAGE(!ec, oc.name << ": " << ec.message());
      if (!ec) {
        auto t = c.negotiated_session_timeout();
        BOOST_CHECK_MESSAGE(t > 0ms && t <= 60s, oc.name << ": negotiated " << t.count() << " ms");
        auto base = fresh_base("client");
        zk::mutex m(c, base + "/m");
        auto [ec_m] = co_await m.try_acquire(with_ec);
        BOOST_CHECK_MESSAGE(!ec_m, oc.name << ": a lock on it: " << ec_m.message());
        if (!ec_m) co_await m.release();
        co_await dlock::test::delete_tree(c, base);
      }
    } else {
      BOOST_CHECK_MESSAGE(ec == dlock::error::invalid_argument, oc.name << ": " << ec.message());
      BOOST_CHECK_EQUAL(c.stats().requests_sent, 0u);
    }
    co_await c.close(with_ec);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(queue_items_and_limits) { dlock::test::run(queue_items()); }
BOOST_AUTO_TEST_CASE(node_data_against_jute_maxbuffer) { dlock::test::run(node_data_sizes()); }
BOOST_AUTO_TEST_CASE(options_of_the_client) { dlock::test::run(client_options()); }
