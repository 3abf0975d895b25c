// One contender process: runs one recipe's loop of critical sections (or
// queue offers and claims) and records every step, until SIGTERM, its
// deadline, or the orchestrator's death.
//
// SIGUSR1 asks a ZooKeeper worker to have its own session expired (a twin
// handle opens and closes the session, as Curator's tests do).
#include <chaos/support.hpp>
#include <common/zk.hpp>

#include <dlock/error.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/with_lock.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/leader_election.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/queue.hpp>
#include <dlock/zk/shared_mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::chaos {
namespace {

namespace zk = dlock::zk;
namespace redis = dlock::redis;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

struct worker_ctx {
  recorder* rec = nullptr;
  std::string backend;
  std::string recipe;
  std::string run_id;
  bool stopping = false;
  std::mt19937_64 rng{std::random_device{}()};
  // For SIGUSR1 (forced expiry): shared, so an expiry in flight never meets a freed client.
  std::shared_ptr<zk::client> session;
  zk::options zk_opts;

  milliseconds between(int lo, int hi) { return milliseconds(std::uniform_int_distribution<int>(lo, hi)(rng)); }
};

std::string ec_name(const error_code& ec) {
  std::string text = ec.message();
  for (auto& c : text)
    if (c == ' ') c = '_';
  return text.empty() ? "unknown" : text;
}

// A loss's reason as the checker reads it: failed_over by name (the checker
// counts the holders told of a failover), anything else as its message.
std::string reason_name(const error_code& ec) {
  return ec == dlock::error::failed_over ? failed_over_reason : ec_name(ec);
}

// A sleep that returns false when cancelled (never throws).
asio::awaitable<bool> pause_for(milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return !ec;
}

/// What a section body needs to know about its lock, whatever the recipe.
struct lock_probe {
  std::string name;  // the lock's short name in the records
  bool write = true;
  std::function<std::int64_t()> token;           // fencing token, 0 for none
  std::function<milliseconds()> validity;        // empty for locks without validity
  std::function<dlock::lock_loss&()> loss;
  bool began = false;  // the body ran since the last acquire
};

// The critical section: a few steps of "work", each a point where a loss
// cancels it. Records begin, validity deadlines, loss or end.
asio::awaitable<void> section_steps(worker_ctx* c, lock_probe* p) {
  auto& rec = *c->rec;
  auto record_validity = [c, p](nanos now) {
    if (!p->validity) return;
    auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(p->validity()).count();
    c->rec->write("valid", p->name, {std::to_string(now + left)}, now);
  };
  // The begin and the validity it was granted with share one instant: a grant
  // with no validity left has its deadline at its begin (a late grant).
  p->began = true;
  auto start = now_ns();
  rec.write("begin", p->name, {p->write ? "w" : "r", std::to_string(p->token ? p->token() : 0)}, start);
  record_validity(start);
  bool redis = c->backend != "zk";
  int steps = std::uniform_int_distribution<int>(1, redis ? 8 : 5)(c->rng);
  for (int i = 0; i < steps; ++i) {
    if (!co_await pause_for(c->between(10, redis ? 250 : 120))) throw std::runtime_error("cancelled");
    if (p->validity && p->validity() <= 0ms) {
      // The holder must stop once its validity is gone, told or not.
      rec.write("end", p->name, {"validity_gone"});
      co_return;
    }
    record_validity(now_ns());
  }
  rec.write("end", p->name);
}

// The critical section: a few steps of "work", each a point where a loss
// cancels it. Records begin, validity deadlines, and loss or end. A cancelled
// coroutine throws as soon as it awaits anything (even entering a nested
// coroutine), so the end is recorded on that path too, at that moment.
asio::awaitable<void> section_body(worker_ctx* c, lock_probe* p) {
  try {
    co_await section_steps(c, p);
  } catch (const std::exception&) {
    auto& loss = p->loss();
    if (loss.lost())
      c->rec->write("lost", p->name, {reason_name(loss.reason())});
    else
      c->rec->write("end", p->name, {"cancelled"});
  }
}

// One contender's loop over `lock` (anything with acquire/release/loss).
template <class Lock>
asio::awaitable<void> contend(worker_ctx* c, Lock* lock, lock_probe* probe) {
  auto body = [c, probe] { return section_body(c, probe); };
  std::string failure;  // how with_lock failed: after the body, a release that told of the loss
  probe->began = false;
  c->rec->write("acquire", probe->name);  // waits from here until its begin (the stuck-waiter rule)
  try {
    co_await dlock::with_lock(*lock, body);
  } catch (const boost::system::system_error& e) {
    failure = reason_name(e.code());
    if (!c->stopping) c->rec->write("note", probe->name, {"with_lock_failed", failure});
  }
  // The hold is over (released, or the release failed): the next holder may be anyone.
  if (failure.empty()) c->rec->write("released", probe->name);
  else c->rec->write("released", probe->name, {failure});
  // An acquire that failed while stopping: this contender wants the lock no more.
  if (!probe->began && c->stopping) c->rec->write("gave_up", probe->name, {failure.empty() ? "stopping" : failure});
}

struct election_lock {
  zk::leader_election* election;
  std::string id;
  template <class Token>
  auto acquire(Token&& token) {
    return election->campaign(id, std::forward<Token>(token));
  }
  template <class Token>
  auto release(Token&& token) {
    return election->resign(std::forward<Token>(token));
  }
  dlock::lock_loss& loss() { return election->loss(); }
  asio::any_io_executor get_executor() const { return election->get_executor(); }
};

asio::awaitable<void> connect_zk(worker_ctx* c, std::shared_ptr<zk::client> session) {
  for (int attempt = 0; !c->stopping; ++attempt) {
    auto [ec] = co_await session->connect(asio::as_tuple(asio::use_awaitable));
    if (!ec) co_return;
    if (attempt > 20) throw boost::system::system_error(ec, "zk connect");
    co_await pause_for(500ms);
  }
}

// Notes around the close, so a worker that hangs on the way out says where.
// The caller resets its cancellation state first: once cancelled, even
// entering a nested coroutine throws.
asio::awaitable<void> close_zk(worker_ctx* c, zk::client* session) {
  c->session = nullptr;
  c->rec->write("note", c->recipe, {"closing"});
  auto [ec] = co_await session->close(asio::as_tuple(asio::use_awaitable));
  c->rec->write("note", c->recipe, {"closed", ec ? ec_name(ec) : "ok"});
}

asio::awaitable<void> zk_lock_loop(worker_ctx* c) {
  auto executor = co_await asio::this_coro::executor;
  auto owned = std::make_shared<zk::client>(executor, c->zk_opts);
  zk::client& session = *owned;
  c->session = owned;
  co_await connect_zk(c, owned);
  std::string path = zk_path(c->run_id, c->recipe);
  zk::mutex exclusive(session, path);
  zk::shared_mutex shared(session, path);
  zk::leader_election election(session, path);
  election_lock leader{&election, c->rec->worker()};

  lock_probe probe;
  probe.name = c->recipe;
  while (!c->stopping) {
    if (c->recipe == "mutex") {
      probe.token = [&] { return exclusive.fencing_token(); };
      probe.loss = [&]() -> dlock::lock_loss& { return exclusive.loss(); };
      co_await contend(c, &exclusive, &probe);
    } else if (c->recipe == "rwlock") {
      probe.write = std::uniform_int_distribution<int>(0, 9)(c->rng) < 3;
      zk::mutex* side = probe.write ? &shared.writer() : &shared.reader();
      probe.token = [side] { return side->fencing_token(); };
      probe.loss = [side]() -> dlock::lock_loss& { return side->loss(); };
      co_await contend(c, side, &probe);
    } else {
      probe.token = [&] { return election.fencing_token(); };
      probe.loss = [&]() -> dlock::lock_loss& { return election.loss(); };
      co_await contend(c, &leader, &probe);
    }
    if (!c->stopping) co_await pause_for(c->between(0, 60));
  }
  co_await asio::this_coro::reset_cancellation_state();
  co_await close_zk(c, &session);
}

// Queue in claim mode: this process offers items and consumes them.
asio::awaitable<void> produce(worker_ctx* c, zk::queue* q) {
  for (int n = 0; !c->stopping; ++n) {
    std::string item = c->rec->worker() + "-" + std::to_string(n);
    auto [ec, node] = co_await q->offer(item, asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::operation_aborted && c->stopping) {
      c->rec->write("offer?", "queue", {item, "cancelled"});
      co_return;
    }
    if (ec)
      c->rec->write("offer?", "queue", {item, ec_name(ec)});
    else
      c->rec->write("offer", "queue", {item, node});
    if (!co_await pause_for(c->between(20, 150))) co_return;
  }
}

asio::awaitable<void> consume(worker_ctx* c, zk::queue* q) {
  while (!c->stopping) {
    auto [ec, claimed] = co_await q->take_claimed(asio::as_tuple(asio::use_awaitable));
    if (ec) {
      if (c->stopping) co_return;
      c->rec->write("note", "queue", {"take_failed", ec_name(ec)});
      if (!co_await pause_for(100ms)) co_return;
      continue;
    }
    c->rec->write("take", "queue", {claimed.data, claimed.name});
    co_await asio::this_coro::reset_cancellation_state();  // an ack follows even when stopping
    co_await pause_for(c->between(5, 60));                  // the work
    auto [ack_ec] = co_await q->ack(claimed, asio::as_tuple(asio::use_awaitable));
    if (!ack_ec)
      c->rec->write("ack", "queue", {claimed.data});
    else if (ack_ec == dlock::error::lost)
      c->rec->write("note", "queue", {"ack_lost", claimed.data});  // the claim expired: back in the queue
    else
      c->rec->write("ack?", "queue", {claimed.data, ec_name(ack_ec)});
  }
}

asio::awaitable<void> zk_queue_loop(worker_ctx* c) {
  using namespace asio::experimental::awaitable_operators;
  auto executor = co_await asio::this_coro::executor;
  auto owned = std::make_shared<zk::client>(executor, c->zk_opts);
  zk::client& session = *owned;
  c->session = owned;
  co_await connect_zk(c, owned);
  zk::queue_options options;
  options.identifier = c->rec->worker();
  zk::queue q(session, zk_path(c->run_id, "queue"), options);
  try {
    co_await (produce(c, &q) && consume(c, &q));
  } catch (const std::exception& e) {
    if (!c->stopping) c->rec->write("error", "queue", {"queue_loop_threw", e.what()});
  }
  co_await asio::this_coro::reset_cancellation_state();
  co_await close_zk(c, &session);
}

redis::options redis_options(const host_port& master) {
  redis::options o;
  o.host = master.host;
  o.port = master.port;
  o.command_timeout = 1000ms;
  o.connect_timeout = 1000ms;
  o.reconnect_max = milliseconds(redis_reconnect_max_ms);  // the stuck-waiter bound counts on it
  return o;
}

asio::awaitable<std::vector<std::shared_ptr<redis::connection>>> connect_masters(worker_ctx* c,
                                                                                 std::size_t count) {
  auto executor = co_await asio::this_coro::executor;
  std::vector<std::shared_ptr<redis::connection>> masters;
  for (auto& m : parse_hosts(required_env("DLOCK_REDIS_MASTERS"))) {
    if (masters.size() == count) break;
    masters.push_back(std::make_shared<redis::connection>(executor, redis_options(m)));
    // The first attempt may fail while a master is down: it keeps reconnecting by itself.
    auto [ec] = co_await masters.back()->connect(asio::as_tuple(asio::use_awaitable));
    if (ec) c->rec->write("note", c->recipe, {"connect_failed", m.host + ":" + std::to_string(m.port), ec_name(ec)});
  }
  co_return masters;
}

// A Redis lock contended for until the run stops, a short random pause
// between holds. `check_tokens`: its fencing tokens must grow.
template <class Lock>
asio::awaitable<void> contend_until_stopped(worker_ctx* c, Lock* lock, bool check_tokens) {
  lock_probe probe;
  probe.name = c->recipe;
  if (check_tokens) probe.token = [lock] { return lock->fencing_token(); };
  probe.validity = [lock] { return lock->validity(); };
  probe.loss = [lock]() -> dlock::lock_loss& { return lock->loss(); };
  while (!c->stopping) {
    co_await contend(c, lock, &probe);
    if (!c->stopping) co_await pause_for(c->between(0, 60));
  }
}

asio::awaitable<void> redis_loop(worker_ctx* c) {
  auto executor = co_await asio::this_coro::executor;
  bool single = c->recipe == "lock";
  auto masters = co_await connect_masters(c, single ? 1 : 5);
  std::string key = redis_key(c->run_id, c->recipe);
  if (single) {
    redis::lock_options o;
    o.fencing = true;
    o.ttl = milliseconds(redis_ttl_ms);
    o.wait = 3000ms;
    o.retry_delay = 30ms;
    o.retry_jitter = 20ms;
    o.auto_extend = true;
    redis::lock lock(*masters[0], key, o);
    co_await contend_until_stopped(c, &lock, false);
  } else {
    redis::redlock_options o;
    o.fencing = true;
    o.ttl = milliseconds(redis_ttl_ms);
    o.retry_count = -1;
    o.wait_limit = 3000ms;
    o.retry_delay = 30ms;
    o.retry_jitter = 20ms;
    o.auto_extend = true;
    redis::redlock lock(executor, masters, key, o);
    // Redlock's tokens are checked: its counters are re-seeded from a majority
    // when a master comes back empty. The single lock's are not: its one
    // counter is lost whenever redis1 is restarted empty (the documented
    // assumption is a counter that survives restarts).
    co_await contend_until_stopped(c, &lock, true);
  }
  co_await asio::this_coro::reset_cancellation_state();
  c->rec->write("note", c->recipe, {"closing"});
  for (auto& m : masters) m->close();
}

// The master the sentinels name (DLOCK_SENTINELS, DLOCK_SENTINEL_MASTER), followed through failovers.
redis::options sentinel_connection_options() {
  // host and port are not used with sentinels.
  redis::options o = redis_options({"127.0.0.1", 6379});
  for (const auto& s : parse_hosts(required_env("DLOCK_SENTINELS"))) o.sentinel.sentinels.push_back({s.host, s.port});
  o.sentinel.master_name = required_env("DLOCK_SENTINEL_MASTER");
  return o;
}

// How many replicas must acknowledge a grant: both of the set's two, unless
// DLOCK_CHAOS_SENTINEL_REPLICAS says otherwise. With one, tokens went back
// across processes (14 in a ten-minute run): after a promotion the old
// master takes grants until +switch-master, and its other replica, still
// attached, acknowledges them; only every replica acknowledging puts each
// grant on the one promoted (RELIABILITY.md, "Redis in production").
int sentinel_replicas() {
  const char* value = std::getenv("DLOCK_CHAOS_SENTINEL_REPLICAS");
  return value && *value ? std::stoi(value) : 2;
}

// The single fenced lock on a Sentinel-managed master. Its key and fencing
// counter reach every replica before the grant counts (WAIT), so a promoted
// replica has them: tokens are checked here, and must grow through failovers.
asio::awaitable<void> sentinel_loop(worker_ctx* c) {
  auto executor = co_await asio::this_coro::executor;
  redis::connection master(executor, sentinel_connection_options());
  // The first attempt may fail mid-failover: the connection keeps trying by itself.
  auto [ec] = co_await master.connect(asio::as_tuple(asio::use_awaitable));
  if (ec) c->rec->write("note", c->recipe, {"connect_failed", ec_name(ec)});
  redis::lock_options o;
  o.fencing = true;
  o.ttl = milliseconds(redis_ttl_ms);
  o.wait = 3000ms;
  o.retry_delay = 30ms;
  o.retry_jitter = 20ms;
  o.auto_extend = true;
  o.replicas = sentinel_replicas();
  o.replica_timeout = milliseconds(sentinel_replica_timeout_ms);
  redis::lock lock(master, redis_key(c->run_id, c->recipe), o);
  c->rec->write("note", c->recipe, {"replicas", std::to_string(o.replicas)});
  co_await contend_until_stopped(c, &lock, true);
  co_await asio::this_coro::reset_cancellation_state();
  c->rec->write("note", c->recipe, {"closing"});
  master.close();
}

asio::awaitable<void> expire_own_session(worker_ctx* c) {
  auto session = c->session;
  if (!session) co_return;
  c->rec->write("note", c->recipe, {"session_expiry_requested", std::to_string(session->session_id())});
  auto twin = c->zk_opts;
  twin.connect_timeout = 2000ms;
  bool expired = co_await dlock::test::expire_session(*session, twin);
  c->rec->write("note", c->recipe, {expired ? "session_expired" : "session_expiry_failed"});
}

asio::awaitable<void> recipe_main(worker_ctx* c) {
  if (c->backend == "redis")
    co_await redis_loop(c);
  else if (c->backend == "sentinel")
    co_await sentinel_loop(c);
  else if (c->recipe == "queue")
    co_await zk_queue_loop(c);
  else
    co_await zk_lock_loop(c);
}

}  // namespace

int worker_main(const arguments& args) {
  recorder rec(argument(args, "out"), argument(args, "backend"), argument(args, "name"));
  worker_ctx c;
  c.rec = &rec;
  c.backend = argument(args, "backend");
  c.recipe = argument(args, "recipe");
  c.run_id = argument(args, "run");
  const auto parent = static_cast<pid_t>(std::stol(argument(args, "parent")));
  const nanos deadline = now_ns() + std::stoll(argument(args, "seconds")) * 1'000'000'000LL + 60'000'000'000LL;
  if (c.backend == "zk") {
    c.zk_opts.hosts = required_env("DLOCK_ZK_ENSEMBLE");
    c.zk_opts.session_timeout = milliseconds(zk_session_timeout_ms);
  }
  rec.write("note", c.recipe, {"worker_start", std::to_string(::getpid())});

  asio::io_context io;
  asio::cancellation_signal stop_signal;
  auto stop = [&](const char* why) {
    if (c.stopping) return;
    c.stopping = true;
    rec.write("note", c.recipe, {"stop", why});
    stop_signal.emit(asio::cancellation_type::terminal);
  };
  asio::signal_set terminate(io, SIGTERM, SIGINT);
  terminate.async_wait([&](error_code ec, int) {
    if (!ec) stop("sigterm");
  });
  asio::signal_set expire(io, SIGUSR1);
  std::function<void()> arm_expire = [&] {
    expire.async_wait([&](error_code ec, int) {
      if (ec) return;
      if (!c.stopping) asio::co_spawn(io, expire_own_session(&c), asio::detached);
      arm_expire();
    });
  };
  arm_expire();
  // The orchestrator may die without telling: leave on our own.
  asio::steady_timer watchdog(io);
  std::function<void()> arm_watchdog = [&] {
    watchdog.expires_after(250ms);
    watchdog.async_wait([&](error_code ec) {
      if (ec) return;
      if (::getppid() != parent) stop("orphaned");
      if (now_ns() > deadline) stop("deadline");
      arm_watchdog();
    });
  };
  arm_watchdog();

  int status = 0;
  bool finished = false;
  asio::co_spawn(io, recipe_main(&c), asio::bind_cancellation_slot(stop_signal.slot(), [&](std::exception_ptr e) {
                   if (e) {
                     try {
                       std::rethrow_exception(e);
                     } catch (const boost::system::system_error& x) {
                       // Stopped while connecting: not a failure.
                       if (!(c.stopping && x.code() == asio::error::operation_aborted)) {
                         rec.write("error", c.recipe, {"worker_threw", x.what()});
                         status = 1;
                       }
                     } catch (const std::exception& x) {
                       rec.write("error", c.recipe, {"worker_threw", x.what()});
                       status = 1;
                     }
                   }
                   finished = true;
                   terminate.cancel();
                   expire.cancel();
                   watchdog.cancel();
                 }));
  while (!finished && !io.stopped()) io.run_one();
  // Everything is closed: the library's own work must drain by itself.
  io.run_for(15s);
  if (!io.stopped()) rec.write("note", c.recipe, {"work_left_15s_after_close"});
  rec.write("note", c.recipe, {"worker_exit", std::to_string(status)});
  return status;
}

}  // namespace dlock::chaos
