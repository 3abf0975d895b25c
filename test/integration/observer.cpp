// dlock::observer against the real servers: every event arrives once, in
// order, with the right figures: a known wait, an extension, a forced loss,
// a Redlock round with a master that did not answer in time, session and
// connection states, queue offers and takes.
#include "common/redis_proxy.hpp"
#include "common/zk.hpp"
#include "integration/redis_support.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/error.hpp>
#include <dlock/observer.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/zk/error.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/queue.hpp>
#include <dlock/zk/semaphore.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace redis = dlock::redis;
namespace zk = dlock::zk;
using dlock::error_code;
using namespace std::chrono_literals;

namespace {

constexpr auto with_ec = asio::as_tuple(asio::deferred);

// Every event, copied (the views are only valid during the call).
struct recorder final : dlock::observer {
  struct event {
    std::string what{};  // "started", "finished", "ended", "extended", "round", "session", "connection", ...
    std::string name{};
    dlock::lock_kind kind{};
    error_code ec{};
    std::chrono::nanoseconds time{};
    std::uint32_t attempts = 0;
    std::int64_t fencing_token = 0;
    bool waits = false;
    dlock::hold_end how{};
    std::chrono::milliseconds before{}, after{};
    std::vector<dlock::master_answer> answers{};
    std::vector<std::string> masters{};
    int state = -1;  // a session or connection state, as its number
  };
  std::vector<event> events;

  void on_acquire_started(const dlock::acquire_started& e) noexcept override {
    events.push_back({.what = "started", .name = std::string(e.lock.name), .kind = e.lock.kind, .waits = e.waits});
  }
  void on_acquire_finished(const dlock::acquire_finished& e) noexcept override {
    events.push_back({.what = "finished", .name = std::string(e.lock.name), .kind = e.lock.kind, .ec = e.outcome,
                      .time = e.waited, .attempts = e.attempts, .fencing_token = e.fencing_token});
  }
  void on_hold_ended(const dlock::hold_ended& e) noexcept override {
    events.push_back({.what = "ended", .name = std::string(e.lock.name), .kind = e.lock.kind, .ec = e.reason,
                      .time = e.held_for, .how = e.how});
  }
  void on_extended(const dlock::extended& e) noexcept override {
    events.push_back({.what = "extended", .name = std::string(e.lock.name), .kind = e.lock.kind, .ec = e.outcome,
                      .before = e.validity_before, .after = e.validity_after});
  }
  void on_redlock_round(const dlock::redlock_round& e) noexcept override {
    event r{.what = "round", .name = std::string(e.lock.name), .kind = e.lock.kind, .ec = e.decision,
            .time = e.decided_after};
    r.waits = e.kind == dlock::round_kind::acquire;
    for (const auto& vote : e.masters) {
      r.answers.push_back(vote.answer);
      r.masters.emplace_back(vote.master);
    }
    events.push_back(std::move(r));
  }
  void on_zk_session(const dlock::zk_session_changed& e) noexcept override {
    events.push_back({.what = "session", .name = std::string(e.hosts), .state = static_cast<int>(e.state)});
  }
  void on_redis_connection(const dlock::redis_connection_changed& e) noexcept override {
    events.push_back({.what = "connection", .name = std::string(e.server), .ec = e.reason,
                      .attempts = static_cast<std::uint32_t>(e.reconnects), .state = static_cast<int>(e.state)});
  }
  void on_queue_offered(const dlock::queue_offered& e) noexcept override {
    events.push_back({.what = "offered", .name = std::string(e.path), .ec = e.outcome, .time = e.took});
  }
  void on_queue_taken(const dlock::queue_taken& e) noexcept override {
    events.push_back({.what = "taken", .name = std::string(e.path), .ec = e.outcome, .time = e.waited});
  }

  std::vector<std::string> sequence(const std::string& about = {}) const {
    std::vector<std::string> out;
    for (const auto& e : events)
      if (about.empty() || e.name == about) out.push_back(e.what);
    return out;
  }
  std::vector<event> of(const std::string& what) const {
    std::vector<event> out;
    for (const auto& e : events)
      if (e.what == what) out.push_back(e);
    return out;
  }
};

using strings = std::vector<std::string>;

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(with_ec);
}

// Until `done()` (at most 10 s): for events that come after a completion.
template <class Predicate>
asio::awaitable<void> until(Predicate done) {
  for (int i = 0; i < 1000 && !done(); ++i) co_await sleep_for(10ms);
}

asio::awaitable<std::shared_ptr<redis::connection>> connected(redis::options o) {
  auto c = std::make_shared<redis::connection>(co_await asio::this_coro::executor, std::move(o));
  auto [ec] = co_await c->connect(with_ec);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  co_return c;
}

asio::awaitable<void> release_after(redis::lock& l, std::chrono::milliseconds delay) {
  co_await sleep_for(delay);
  co_await l.release(with_ec);
}

// --- Redis lock: a known wait, an extension, a release ---

asio::awaitable<void> redis_lock_events() {
  auto conn = co_await connected(redis_test::master_options());
  auto seen = std::make_shared<recorder>();
  auto key = dlock::test::unique_name("dlock-test:observer:lock");
  redis::lock holder(*conn, key);
  redis::lock_options o;
  o.retry_delay = 20ms;
  o.retry_jitter = 0ms;
  o.observer = seen;
  redis::lock waiter(*conn, key, o);

  auto [held] = co_await holder.acquire(with_ec);
  BOOST_REQUIRE(!held);
  auto [taken] = co_await waiter.try_acquire(with_ec);
  BOOST_TEST((taken == dlock::error::taken));
  BOOST_TEST(seen->sequence() == (strings{"started", "finished"}));
  BOOST_TEST(!seen->events[0].waits);
  BOOST_TEST(seen->events[1].attempts == 1u);
  seen->events.clear();

  // The holder lets go 200 ms after the waiter began: it waited at least that.
  auto acquiring = waiter.acquire(with_ec);
  asio::co_spawn(co_await asio::this_coro::executor, release_after(holder, 200ms), asio::detached);
  auto [acquired] = co_await std::move(acquiring);
  BOOST_REQUIRE(!acquired);
  BOOST_TEST(seen->sequence() == (strings{"started", "finished"}));
  auto finished = seen->events.at(1);
  BOOST_TEST(seen->events[0].waits);
  BOOST_TEST(finished.name == key);
  BOOST_TEST((finished.kind == dlock::lock_kind::redis_lock));
  BOOST_TEST(!finished.ec);
  BOOST_TEST(finished.time >= 200ms, "waited " << finished.time.count() << " ns");
  BOOST_TEST(finished.attempts >= 2u);

  co_await sleep_for(50ms);
  auto [extended] = co_await waiter.extend(20s, with_ec);
  BOOST_REQUIRE(!extended);
  auto [released] = co_await waiter.release(with_ec);
  BOOST_REQUIRE(!released);
  BOOST_TEST(seen->sequence() == (strings{"started", "finished", "extended", "ended"}));
  auto extension = seen->events.at(2);
  BOOST_TEST(!extension.ec);
  BOOST_TEST(extension.before < 10s);  // the ttl's 10 s, less the time held
  BOOST_TEST(extension.after > 19s);
  auto ended = seen->events.at(3);
  BOOST_TEST((ended.how == dlock::hold_end::released));
  BOOST_TEST(!ended.ec);
  BOOST_TEST(ended.time >= 50ms);

  // Refused at once: told all the same, nothing else.
  seen->events.clear();
  auto [refused] = co_await waiter.acquire_for(0ms, with_ec);
  BOOST_TEST((refused == dlock::error::invalid_argument));
  BOOST_TEST(seen->sequence() == (strings{"started", "finished"}));
  BOOST_TEST((seen->events.at(1).ec == dlock::error::invalid_argument));
  BOOST_TEST(seen->events.at(1).attempts == 0u);
  conn->close();
}

// --- Redis lock: the validity runs out while held ---

asio::awaitable<void> redis_lock_loss() {
  auto conn = co_await connected(redis_test::master_options());
  auto seen = std::make_shared<recorder>();
  redis::lock_options o;
  o.ttl = 300ms;
  o.observer = seen;
  redis::lock l(*conn, dlock::test::unique_name("dlock-test:observer:loss"), o);
  auto [ec] = co_await l.acquire(with_ec);
  BOOST_REQUIRE(!ec);
  co_await sleep_for(600ms);
  auto [released] = co_await l.release(with_ec);
  BOOST_TEST((released == dlock::error::lost));
  BOOST_TEST(seen->sequence() == (strings{"started", "finished", "ended"}), "one end: the loss, not the release");
  auto ended = seen->events.at(2);
  BOOST_TEST((ended.how == dlock::hold_end::lost));
  BOOST_TEST((ended.ec == dlock::error::lost));
  BOOST_TEST(ended.time < 300ms);  // the validity is the ttl less the drift
  BOOST_TEST(ended.time > 200ms);
  conn->close();
}

// --- a connection's observer: its states, and its locks' events ---

asio::awaitable<void> connection_events() {
  auto seen = std::make_shared<recorder>();
  auto o = redis_test::master_options();
  o.observer = seen;
  auto server = o.host + ":" + std::to_string(o.port);
  auto conn = co_await connected(o);
  {
    redis::lock l(*conn, dlock::test::unique_name("dlock-test:observer:fallback"));
    co_await l.acquire(with_ec);
    co_await l.release(with_ec);
  }
  conn->close();
  co_await until([&] { return seen->of("connection").size() >= 3; });
  BOOST_TEST(seen->sequence() == (strings{"connection", "connection", "started", "finished", "ended", "connection"}));
  auto states = seen->of("connection");
  BOOST_REQUIRE(states.size() == 3u);
  BOOST_TEST(states[0].state == static_cast<int>(redis::connection_state::connecting));
  BOOST_TEST(states[1].state == static_cast<int>(redis::connection_state::connected));
  BOOST_TEST(states[2].state == static_cast<int>(redis::connection_state::closed));
  for (const auto& s : states) BOOST_TEST(s.name == server);
}

// --- Redlock: each master's answer, one of them too late ---

asio::awaitable<void> redlock_rounds() {
  auto masters = dlock::test::redis_masters();
  BOOST_REQUIRE_GE(masters.size(), 5u);
  dlock::test::redis_proxy slow(masters[0].host, masters[0].port);
  std::vector<std::shared_ptr<redis::connection>> conns;
  redis::options first;
  first.host = slow.host();
  first.port = slow.port();
  conns.push_back(co_await connected(first));
  for (std::size_t i = 1; i < 5; ++i) conns.push_back(co_await connected(redis_test::master_options(i)));

  auto seen = std::make_shared<recorder>();
  redis::redlock_options o;
  o.master_timeout = 100ms;
  o.observer = seen;
  auto key = dlock::test::unique_name("dlock-test:observer:redlock");
  redis::redlock lock(co_await asio::this_coro::executor, conns, key, o);
  slow.hold_replies(1s, 1);  // the first master answers the SET a second late
  auto [ec] = co_await lock.acquire(with_ec);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  // The round settles at the first master's timeout, after the acquire completed.
  co_await until([&] { return !seen->of("round").empty(); });
  auto [extended] = co_await lock.extend(10s, with_ec);
  co_await until([&] { return seen->of("round").size() >= 2; });
  auto [released] = co_await lock.release(with_ec);
  BOOST_TEST(!released);
  // The extension is told at its decision, its round once the slow master timed out.
  BOOST_TEST(seen->sequence() == (strings{"started", "finished", "round", "extended", "round", "ended"}));
  auto rounds = seen->of("round");
  BOOST_REQUIRE(rounds.size() == 2u);
  BOOST_TEST(rounds[0].waits, "the first round is the acquire's");
  BOOST_TEST(!rounds[0].ec);
  BOOST_TEST(rounds[0].masters[0] == slow.host() + ":" + std::to_string(slow.port()));
  BOOST_TEST((rounds[0].answers == std::vector<dlock::master_answer>{
                  dlock::master_answer::timed_out, dlock::master_answer::yes, dlock::master_answer::yes,
                  dlock::master_answer::yes, dlock::master_answer::yes}));
  BOOST_TEST(rounds[0].time < 100ms, "decided by the majority, before the slow master's timeout");
  BOOST_TEST(!rounds[1].waits);
  BOOST_TEST(!extended);
  auto finished = seen->of("finished").at(0);
  BOOST_TEST((finished.kind == dlock::lock_kind::redlock));
  BOOST_TEST(finished.attempts == 1u);
  for (auto& c : conns) c->close();
}

// --- ZooKeeper: a client's observer, its session and its locks ---

asio::awaitable<void> zk_lock_events() {
  auto seen = std::make_shared<recorder>();
  auto base = dlock::test::zk_options(dlock::test::zk_hosts(), 4s);
  auto o = base;
  o.observer = seen;
  zk::client zk(co_await asio::this_coro::executor, o);
  co_await zk.connect();
  BOOST_TEST(seen->sequence() == (strings{"session"}));
  BOOST_TEST(seen->events.at(0).state == static_cast<int>(zk::session_state::connected));
  BOOST_TEST(seen->events.at(0).name == o.hosts);
  seen->events.clear();

  auto path = "/dlock-test/observer/" + dlock::test::unique_name("mutex");
  zk::mutex m(zk, path);
  co_await m.acquire();
  auto token = m.fencing_token();
  co_await m.release();
  BOOST_TEST(seen->sequence() == (strings{"started", "finished", "ended"}));
  auto finished = seen->events.at(1);
  BOOST_TEST((finished.kind == dlock::lock_kind::zk_mutex));
  BOOST_TEST(finished.name == path);
  BOOST_TEST(!finished.ec);
  BOOST_TEST(finished.attempts == 2u, "the parents did not exist: a create, the parents, a create");
  BOOST_TEST(finished.fencing_token == token);
  BOOST_TEST((seen->events.at(2).how == dlock::hold_end::released));

  // The session expires while held: the hold ends lost, once.
  seen->events.clear();
  co_await m.acquire();
  BOOST_REQUIRE(co_await dlock::test::expire_session(zk, base));
  co_await until([&] { return !seen->of("ended").empty(); });
  auto [released] = co_await m.release(with_ec);
  BOOST_TEST(!!released);
  auto ended = seen->of("ended");
  BOOST_REQUIRE(ended.size() == 1u);
  BOOST_TEST((ended[0].how == dlock::hold_end::lost));
  // Suspended first (loss_policy::standard), or expired: the reason release() tells too.
  BOOST_TEST((ended[0].ec == released), ended[0].ec.message());
  BOOST_TEST((released == zk::error::connection_loss || released == zk::error::session_expired));
  bool told_lost = false;
  for (const auto& e : seen->of("session")) told_lost |= e.state == static_cast<int>(zk::session_state::lost);
  BOOST_TEST(told_lost);

  // A semaphore and a queue on the same client.
  seen->events.clear();
  co_await dlock::test::wait_for_state(zk, zk::session_state::connected);
  zk::semaphore s(zk, path + "-semaphore", 2);
  co_await s.acquire(2);
  co_await s.release();
  zk::queue q(zk, path + "-queue");
  co_await q.offer("item");
  co_await q.take();
  co_await q.poll();
  BOOST_TEST(seen->sequence(path + "-semaphore") == (strings{"started", "finished", "ended"}));
  BOOST_TEST(seen->sequence(path + "-semaphore/locks").empty(), "the semaphore's own mutex is not the user's lock");
  BOOST_TEST(seen->sequence(path + "-queue") == (strings{"offered", "taken", "taken"}));
  auto taken = seen->of("taken");
  BOOST_REQUIRE(taken.size() == 2u);
  BOOST_TEST(!taken.at(0).ec);
  BOOST_TEST((taken.at(1).ec == dlock::error::empty));
  recorder::event semaphore;
  for (const auto& e : seen->of("finished"))
    if (e.name == path + "-semaphore") semaphore = e;
  BOOST_TEST(semaphore.attempts == 2u, "both leases in one create, sent again once the parents were made");
  BOOST_TEST((semaphore.kind == dlock::lock_kind::zk_semaphore));

  co_await zk.close();
  BOOST_TEST(seen->events.back().what == "session");
  BOOST_TEST(seen->events.back().state == static_cast<int>(zk::session_state::closed));
  zk::client cleaner(co_await asio::this_coro::executor, base);
  co_await cleaner.connect();
  for (const auto& p : {path, path + "-semaphore", path + "-queue", path + "-queue.claims"})
    co_await dlock::test::delete_tree(cleaner, p);
  co_await cleaner.close();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(observer)

BOOST_AUTO_TEST_CASE(redis_lock_tells_a_known_wait_an_extension_and_a_release) { redis_test::run(redis_lock_events()); }
BOOST_AUTO_TEST_CASE(redis_lock_tells_its_loss_once) { redis_test::run(redis_lock_loss()); }
BOOST_AUTO_TEST_CASE(a_connection_tells_its_states_and_its_locks_events) { redis_test::run(connection_events()); }
BOOST_AUTO_TEST_CASE(redlock_tells_each_masters_answer_and_a_timeout) { redis_test::run(redlock_rounds()); }
BOOST_AUTO_TEST_CASE(zk_client_tells_its_session_locks_semaphores_and_queues) { redis_test::run(zk_lock_events()); }

BOOST_AUTO_TEST_SUITE_END()
