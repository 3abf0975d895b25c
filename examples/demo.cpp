// The demo scripts/demo runs: workers contend for a ZooKeeper mutex, a Redis
// lock and a Redlock, printing who holds what; then locks are lost, once to
// an expired ZooKeeper session (fencing tokens stop the late holder), once to
// a Redis holder paused past its TTL (redis::fenced_set refuses its write), once to
// a stopped Redis master (the holder's work is cancelled), and Redlock keeps
// working with that master down.
//
// Reads DLOCK_ZK_HOSTS and DLOCK_REDIS_MASTERS; stopping a master needs
// DLOCK_SERVERS_SCRIPT (set by scripts/servers), else that part is skipped.
// Exits non-zero if two workers ever held one lock or a loss went unnoticed.
#include "example_support.hpp"

#include <dlock/redis/connection.hpp>
#include <dlock/redis/fenced.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/with_lock.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/mutex.hpp>

#include <boost/system/system_error.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace redis = dlock::redis;
namespace zk = dlock::zk;
using namespace std::chrono_literals;
using masters_t = std::vector<std::shared_ptr<redis::connection>>;

const std::vector<std::string> workers = {"ann", "bob", "cat"};
const std::string run_id = example::unique("demo");

// Who is inside a lock right now: never more than one.
struct holders {
  int inside = 0;
  void enter() { example::check(++inside == 1, "one holder at a time"); }
  void leave() { --inside; }
};

zk::lock_options named(std::string who) {
  zk::lock_options options;
  options.identifier = std::move(who);  // shown by participants(), stored in the lock node
  return options;
}

// ---- Part 1: contention --------------------------------------------------

asio::awaitable<void> zk_turns(zk::client* session, holders* h, std::string who) {
  zk::mutex m(*session, "/dlock-demo/" + run_id, named(who));
  for (int turn = 0; turn < 2; ++turn) {
    co_await m.acquire();
    h->enter();
    auto queue = co_await m.participants();
    std::printf("[zk]      %s holds the mutex, fencing token %lld, %zu waiting\n", who.c_str(),
                static_cast<long long>(m.fencing_token()), queue.size() - 1);
    co_await example::sleep_for(150ms);
    h->leave();
    co_await m.release();
  }
}

asio::awaitable<void> redis_turns(redis::connection* conn, holders* h, std::string who) {
  redis::lock l(*conn, run_id, {.ttl = 2s, .retry_delay = 40ms, .retry_jitter = 20ms});
  for (int turn = 0; turn < 2; ++turn) {
    co_await l.acquire();
    h->enter();
    std::printf("[redis]   %s holds key %s, token %.8s..., valid %lld ms\n", who.c_str(), l.key().c_str(),
                l.token().c_str(), static_cast<long long>(l.validity().count()));
    co_await example::sleep_for(150ms);
    h->leave();
    co_await l.release();
    // Redis waiters retry on a timer (not fair): rest, or this worker wins again.
    co_await example::sleep_for(100ms);
  }
}

std::size_t masters_that_said_ok(const std::string& outcomes) {
  std::size_t count = 0;
  for (auto at = outcomes.find("=ok"); at != std::string::npos; at = outcomes.find("=ok", at + 1)) ++count;
  return count;
}

asio::awaitable<void> redlock_turns(masters_t masters, holders* h, std::string who) {
  redis::redlock rl(co_await asio::this_coro::executor, masters, run_id + "-redlock",
                    {.ttl = 2s, .retry_count = -1, .retry_delay = 40ms, .retry_jitter = 20ms, .wait_limit = 10s});
  for (int turn = 0; turn < 2; ++turn) {
    co_await rl.acquire();
    h->enter();
    std::printf("[redlock] %s holds: the first %zu of %zu masters said yes, valid %lld ms\n", who.c_str(),
                masters_that_said_ok(rl.last_outcomes()), rl.masters(), static_cast<long long>(rl.validity().count()));
    co_await example::sleep_for(150ms);
    h->leave();
    co_await rl.release();
    co_await example::sleep_for(100ms);  // rest: Redlock waiters retry on a timer too
  }
}

asio::awaitable<void> contention(zk::client& session, masters_t masters) {
  std::printf("-- three workers, two turns each, on each kind of lock\n");
  holders zk_holders, redis_holders, redlock_holders;
  std::vector<asio::awaitable<void>> zk_workers, redis_workers, redlock_workers;
  for (auto& who : workers) zk_workers.push_back(zk_turns(&session, &zk_holders, who));
  co_await example::all_of(std::move(zk_workers));
  for (auto& who : workers) redis_workers.push_back(redis_turns(masters[0].get(), &redis_holders, who));
  co_await example::all_of(std::move(redis_workers));
  for (auto& who : workers) redlock_workers.push_back(redlock_turns(masters, &redlock_holders, who));
  co_await example::all_of(std::move(redlock_workers));
}

// ---- Part 2: a ZooKeeper session expires; fencing tokens stop the late holder

// Storage that keeps the highest fencing token it has seen and rejects writes
// with a lower one: what makes a lock safe against a holder that was paused
// (GC, swap, SIGSTOP) past its session and resumes writing.
struct fenced_store {
  std::int64_t highest = 0;
  std::int64_t last_token_of_ann = 0;
  int accepted_writes = 0;
  bool write(std::int64_t token, const std::string& who) {
    bool accepted = token >= highest;
    // Tell the first write of each token and every rejection; count the rest.
    if (!accepted || token != highest)
      std::printf("[store]   %s writes from %s with token %lld\n", accepted ? "accepts" : "REJECTS", who.c_str(),
                  static_cast<long long>(token));
    if (accepted) {
      highest = token;
      ++accepted_writes;
    }
    return accepted;
  }
};

// Ann's critical section: writes every 200 ms until with_lock cancels it.
// The token is read once, at the start of the hold, as a real writer would.
asio::awaitable<void> ann_keeps_writing(std::int64_t token, fenced_store* store) {
  store->last_token_of_ann = token;
  for (;;) {
    store->write(token, "ann");
    co_await example::sleep_for(200ms);  // a loss cancels this wait: the loop ends
  }
}

// Ends `victim`'s session now, as an outage longer than the session timeout
// would: a second handle joins the same session (id and password) and closes
// it. The victim may steal its session back first, so retry until it changed.
asio::awaitable<void> expire_session(zk::client* victim, std::chrono::milliseconds after) {
  co_await example::sleep_for(after);
  std::printf("[demo]    expiring ann's ZooKeeper session (as a long pause or partition would)\n");
  const auto id = victim->session_id();
  for (int attempt = 0; attempt < 50 && victim->session_id() == id; ++attempt) {
    auto options = example::zk_options();
    options.session_id = id;
    options.session_password = victim->session_password();
    options.reopen_on_expiry = false;
    zk::client twin(co_await asio::this_coro::executor, options);
    co_await twin.connect(asio::as_tuple(asio::deferred));  // may fail: the victim took it back
    co_await twin.close(asio::as_tuple(asio::deferred));
    co_await example::sleep_for(100ms);
  }
}

asio::awaitable<void> ann_holds(zk::client* ann_session, fenced_store* store, std::string path) {
  auto options = named("ann");
  options.policy = zk::loss_policy::session;  // lost when the session is, not at the first disconnection
  zk::mutex ann(*ann_session, path, options);
  auto body = [&ann, store] { return ann_keeps_writing(ann.fencing_token(), store); };
  try {
    co_await dlock::with_lock(ann, body);
    example::check(false, "ann's session loss was noticed");
  } catch (const boost::system::system_error& e) {
    std::printf("[zk]      ann lost the mutex after %d writes (%s): with_lock cancelled her writes\n",
                store->accepted_writes, e.code().message().c_str());
  }
}

asio::awaitable<void> ann_loses_her_session(fenced_store* store, std::string path) {
  zk::client ann_session(co_await asio::this_coro::executor, example::zk_options());
  co_await ann_session.connect();
  std::vector<asio::awaitable<void>> both;
  both.push_back(ann_holds(&ann_session, store, path));
  both.push_back(expire_session(&ann_session, 500ms));
  co_await example::all_of(std::move(both));
  co_await ann_session.close();
}

asio::awaitable<void> zk_session_loss(zk::client& session) {
  std::printf("-- a ZooKeeper session expires while its holder writes\n");
  fenced_store store;
  auto path = "/dlock-demo/" + run_id + "-fenced";
  co_await ann_loses_her_session(&store, path);
  zk::mutex bob(session, path, named("bob"));
  co_await bob.acquire();
  std::printf("[zk]      bob holds the mutex, fencing token %lld\n", static_cast<long long>(bob.fencing_token()));
  example::check(store.write(bob.fencing_token(), "bob"), "the new holder writes");
  example::check(!store.write(store.last_token_of_ann, "ann, resuming late"), "the late holder is fenced off");
  co_await bob.release();
}

// ---- Part 3: a Redis master stops; the Redis lock is lost, Redlock is not

// Runs `scripts/servers ACTION NAME` (the script the servers were started with).
bool servers(const char* action, const char* name) {
  const char* script = std::getenv("DLOCK_SERVERS_SCRIPT");
  if (!script || !*script) return false;
  auto command = std::string(script) + " " + action + " " + name;
  return std::system(command.c_str()) == 0;
}

// Resumes the stopped master on every way out.
struct stopped_master {
  stopped_master() { example::check(servers("pause", "redis1"), "redis1 stopped"); }
  ~stopped_master() { servers("resume", "redis1"); }
  stopped_master(const stopped_master&) = delete;
  stopped_master& operator=(const stopped_master&) = delete;
};

// validity() drops to 0 once the key may have expired: a careful holder
// stops its writes then, even before the loss is told a moment later.
asio::awaitable<void> ann_keeps_working(redis::lock* l) {
  for (;;) {
    if (l->validity() > 0ms)
      std::printf("[redis]   ann works under the Redis lock, valid %lld ms\n",
                  static_cast<long long>(l->validity().count()));
    co_await example::sleep_for(300ms);
  }
}

// Stops redis1 `after` a while, then shows Redlock still works on the other four.
asio::awaitable<void> stop_redis1_then_redlock(masters_t masters, std::chrono::milliseconds after, bool* done) {
  co_await example::sleep_for(after);
  stopped_master stopped;
  std::printf("[demo]    redis1 stopped (SIGSTOP)\n");
  while (!*done) co_await example::sleep_for(50ms);  // until the Redis lock's loss is told
  redis::redlock rl(co_await asio::this_coro::executor, masters, run_id + "-redlock-degraded");
  co_await rl.acquire();
  std::printf("[redlock] bob holds with redis1 down: %zu of %zu masters said yes\n", masters_that_said_ok(rl.last_outcomes()),
              rl.masters());
  co_await rl.release();
}

asio::awaitable<void> redis_lock_loss(redis::connection* conn, bool* done) {
  redis::lock l(*conn, run_id + "-extended", {.ttl = 1s, .auto_extend = true});
  auto body = [&l] { return ann_keeps_working(&l); };
  try {
    co_await dlock::with_lock(l, body);
    example::check(false, "the Redis lock's loss was noticed");
  } catch (const boost::system::system_error& e) {
    std::printf("[redis]   ann lost the Redis lock (%s): with_lock cancelled her work\n", e.code().message().c_str());
  }
  *done = true;
}

asio::awaitable<void> redis_master_stops(masters_t masters) {
  std::printf("-- a Redis master stops while a holder works (auto-extension, ttl 1 s)\n");
  if (!std::getenv("DLOCK_SERVERS_SCRIPT")) {
    std::printf("[demo]    skipped: DLOCK_SERVERS_SCRIPT is not set (start the servers with scripts/servers)\n");
    co_return;
  }
  // The lock's own connection gives up on a command quickly, so the release
  // after the loss does not wait the default 2 s for the stopped master.
  auto options = example::redis_masters().front();
  options.command_timeout = 300ms;
  redis::connection conn(co_await asio::this_coro::executor, options);
  co_await conn.connect();
  bool done = false;
  std::vector<asio::awaitable<void>> both;
  both.push_back(redis_lock_loss(&conn, &done));
  both.push_back(stop_redis1_then_redlock(masters, 500ms, &done));
  co_await example::all_of(std::move(both));
  std::printf("[demo]    redis1 resumed\n");
  conn.close();
}

// ---- A Redis holder paused past its TTL; its fencing token stops its write

asio::awaitable<dlock::error_code> fenced_write(redis::connection& conn, const std::string& key, const char* who,
                                                std::int64_t token) {
  auto [ec] = co_await redis::fenced_set(conn, key, who, token, asio::as_tuple(asio::deferred));
  if (!ec) std::printf("[redis]   %s writes %s with fencing token %lld\n", who, key.c_str(), static_cast<long long>(token));
  co_return ec;
}

asio::awaitable<void> redis_paused_holder(redis::connection& conn) {
  std::printf("-- a Redis holder is paused past its TTL (1 s), then writes\n");
  auto key = run_id + "-fenced", resource = run_id + "-orders";
  redis::lock ann(conn, key, {.ttl = 1s, .fencing = true}), bob(conn, key, {.ttl = 1s, .fencing = true});
  co_await ann.acquire();
  auto ann_token = ann.fencing_token();
  example::check(!co_await fenced_write(conn, resource, "ann", ann_token), "ann writes while she holds");
  std::printf("[redis]   ann is paused (a long GC, say) for 1.5 s\n");
  co_await example::sleep_for(1500ms);
  co_await bob.acquire();
  example::check(bob.fencing_token() > ann_token, "bob's token is larger");
  example::check(!co_await fenced_write(conn, resource, "bob", bob.fencing_token()), "bob writes");
  auto late = co_await fenced_write(conn, resource, "ann", ann_token);
  example::check(late == dlock::error::stale_token, "ann's late write is refused");
  std::printf("[redis]   ann resumes and writes with token %lld: refused (%s)\n", static_cast<long long>(ann_token),
              late.message().c_str());
  co_await bob.release();
  auto [ec] = co_await ann.release(asio::as_tuple(asio::deferred));
  std::printf("[redis]   ann's release: %s\n", ec ? ec.message().c_str() : "ok");
}

asio::awaitable<void> demo() {
  auto executor = co_await asio::this_coro::executor;
  zk::client session(executor, example::zk_options());
  co_await session.connect();
  auto masters = co_await example::connect_masters(5);
  std::printf("ZooKeeper %s, Redis masters %s\n", session.current_server().c_str(),
              example::env_or("DLOCK_REDIS_MASTERS", "127.0.0.1:6379").c_str());
  co_await contention(session, masters);
  co_await zk_session_loss(session);
  co_await redis_paused_holder(*masters.front());
  co_await redis_master_stops(masters);
  for (auto& master : masters) master->close();
  co_await session.close();
  std::printf("-- done: never two holders at once, every loss told to its holder\n");
}

int main() { return example::run("demo", demo); }
