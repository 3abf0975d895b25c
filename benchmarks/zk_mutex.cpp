// dlock::zk::mutex against the bare C client running the same recipe in its
// own poll loop. Scenarios (each printed for impl "raw" and "dlock"):
//   zk_uncontended  one coroutine, one path, 2,000 acquire+release
//   zk_contended    16 contenders on one path, 200 acquisitions each, over one session
//   zk_contended_sessions  zk_contended with a session of its own per contender
//                   (16 sessions; dlock: 16 clients on one io_context, one thread;
//                   raw: 16 handles in one poll loop), as 16 processes would contend
//   zk_many_locks   64 coroutines on 64 paths over one session, 200 each
//   zk_ensemble_uncontended  zk_uncontended against the 3-node ensemble
//                   (DLOCK_ZK_ENSEMBLE; skipped when unset): every write is a quorum write
//   zk_semaphore_uncontended  dlock::zk::semaphore (4 leases), one coroutine, 2,000
//                   acquire+release; raw: Curator's InterProcessSemaphoreV2 steps in C
//                   callbacks (lock node, list locks, lease node, list leases, delete the
//                   lock node; release: delete the lease)
// plus zk_waiting_memory: client memory of 10,000 waiting acquirers (dlock).
// Hosts: DLOCK_ZK_HOSTS (default 127.0.0.1:2181), DLOCK_ZK_ENSEMBLE.
#include "common.hpp"

#include <dlock/zk/client.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/semaphore.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <zookeeper/zookeeper.h>

#include <malloc.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace asio = boost::asio;
using bench_clock = dlock::bench::clock;
using dlock::bench::recorder;

namespace {

const std::string standalone_hosts = dlock::bench::env_or("DLOCK_ZK_HOSTS", "127.0.0.1:2181");
const std::string ensemble_hosts = dlock::bench::env_or("DLOCK_ZK_ENSEMBLE", "");
const std::string root = "/dlock-bench-" + std::to_string(getpid());

// ---------------------------------------------------------------- raw ----

struct raw_session {
  zhandle_t* zh = nullptr;

  explicit raw_session(const std::string& hosts) {
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zh = zookeeper_init(hosts.c_str(), nullptr, 10000, nullptr, nullptr, 0);
    if (!zh) throw std::runtime_error("zookeeper_init");
    zoo_set_servers_resolution_delay(zh, -1);  // no DNS per poll, like dlock's client
    run_until([this] { return zoo_state(zh) == ZOO_CONNECTED_STATE; });
  }
  ~raw_session() { zookeeper_close(zh); }

  // Fills `p` with what the handle waits for (fd -1 while it has no socket,
  // which poll skips); returns how long it may wait, in ms.
  int interest(pollfd& p) {
    int fd = -1, interest = 0;
    timeval tv{};
    zookeeper_interest(zh, &fd, &interest, &tv);
    p = pollfd{fd, static_cast<short>(((interest & ZOOKEEPER_READ) ? POLLIN : 0) |
                                      ((interest & ZOOKEEPER_WRITE) ? POLLOUT : 0)),
               0};
    return static_cast<int>(tv.tv_sec * 1000 + tv.tv_usec / 1000);
  }

  // Processes until nothing is left.
  void process(short revents) {
    int events = ((revents & POLLIN) ? ZOOKEEPER_READ : 0) | ((revents & POLLOUT) ? ZOOKEEPER_WRITE : 0);
    for (int i = 0; i < 64 && zookeeper_process(zh, events) == ZOK; ++i) events = ZOOKEEPER_READ;
  }

  // The minimal loop: interest, poll, process.
  template <class Done>
  void run_until(Done done) {
    while (!done()) {
      pollfd p{};
      int timeout = interest(p);
      poll(&p, p.fd >= 0 ? 1 : 0, timeout);
      process(p.revents);
    }
  }
};

using raw_sessions = std::vector<std::unique_ptr<raw_session>>;

// The minimal loop over several handles: one poll for all; a handle is
// processed when its socket is ready, or every one when the poll times out
// (their timers). Processing idle handles would cost each a read that finds
// nothing, a handicap a real event loop does not have. With one handle this
// is run_until.
template <class Done>
void run_all_until(const raw_sessions& sessions, Done done) {
  std::vector<pollfd> fds(sessions.size());
  while (!done()) {
    int timeout = -1;
    for (std::size_t i = 0; i < sessions.size(); ++i) {
      int t = sessions[i]->interest(fds[i]);
      timeout = timeout < 0 ? t : std::min(timeout, t);
    }
    bool timed_out = poll(fds.data(), fds.size(), timeout) == 0;
    for (std::size_t i = 0; i < sessions.size(); ++i)
      if (timed_out || fds[i].revents) sessions[i]->process(fds[i].revents);
  }
}

std::int64_t sequence_of(const char* name) { return std::atoll(name + std::strlen(name) - 10); }

// One contender running the recipe with C callbacks: create, list, hold if
// first else get+watch the predecessor, list again when it fires; release
// by delete. The naive sequence: no pipelining.
struct raw_contender {
  zhandle_t* zh;
  std::string path;
  std::string prefix;
  std::string node;
  std::string watched;
  int rounds_left;
  int* running;
  recorder* rec;
  bench_clock::time_point started;

  void start() {
    started = bench_clock::now();
    zoo_acreate(zh, prefix.c_str(), "bench", 5, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL | ZOO_SEQUENCE, on_created, this);
  }
  static void on_created(int rc, const char* value, const void* data) {
    auto* self = const_cast<raw_contender*>(static_cast<const raw_contender*>(data));
    if (rc != ZOK) throw std::runtime_error("raw create failed: " + std::to_string(rc));
    self->node = value;
    self->list();
  }
  void list() { zoo_aget_children(zh, path.c_str(), 0, on_listed, this); }
  static void on_listed(int rc, const String_vector* children, const void* data) {
    auto* self = const_cast<raw_contender*>(static_cast<const raw_contender*>(data));
    if (rc != ZOK) throw std::runtime_error("raw list failed");
    auto own = sequence_of(self->node.c_str());
    const char* predecessor = nullptr;
    std::int64_t best = -1;
    for (int i = 0; i < children->count; ++i) {
      auto s = sequence_of(children->data[i]);
      if (s < own && s > best) {
        best = s;
        predecessor = children->data[i];
      }
    }
    if (!predecessor) return self->acquired();
    self->watched = self->path + "/" + predecessor;
    zoo_awget(self->zh, self->watched.c_str(), on_watch, self, on_got, self);
  }
  static void on_got(int rc, const char*, int, const Stat*, const void* data) {
    auto* self = const_cast<raw_contender*>(static_cast<const raw_contender*>(data));
    if (rc == ZNONODE) self->list();
  }
  static void on_watch(zhandle_t*, int type, int, const char*, void* ctx) {
    if (type == ZOO_SESSION_EVENT) return;
    static_cast<raw_contender*>(ctx)->list();
  }
  void acquired() {
    rec->add_latency(bench_clock::now() - started);
    zoo_adelete(zh, node.c_str(), -1, on_deleted, this);
  }
  static void on_deleted(int rc, const void* data) {
    auto* self = const_cast<raw_contender*>(static_cast<const raw_contender*>(data));
    if (rc != ZOK) throw std::runtime_error("raw delete failed");
    if (--self->rounds_left > 0) return self->start();
    --*self->running;
  }
};

// Creates root and `path` (either may exist) and waits for both answers:
// contenders on other sessions must not create their nodes before `path` is there.
void raw_ensure(raw_session& s, const std::string& path) {
  int done = 0;
  auto cb = [](int, const char*, const void* d) { ++*const_cast<int*>(static_cast<const int*>(d)); };
  zoo_acreate(s.zh, root.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, cb, &done);
  zoo_acreate(s.zh, path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, cb, &done);
  s.run_until([&] { return done == 2; });
}

raw_sessions raw_connect(const std::string& hosts, int sessions) {
  raw_sessions all;
  for (int i = 0; i < sessions; ++i) all.push_back(std::make_unique<raw_session>(hosts));
  return all;
}

// PATHS x PER_PATH contenders; contender i runs on session i mod SESSIONS.
void raw_scenario(const std::string& bench, const std::string& hosts, int paths, int per_path, int rounds,
                  int sessions = 1) {
  if (!dlock::bench::wanted(bench, "raw")) return;
  auto all = raw_connect(hosts, sessions);
  recorder rec;
  std::vector<std::unique_ptr<raw_contender>> contenders;
  int running = paths * per_path;
  for (int p = 0; p < paths; ++p) {
    auto path = root + "/raw-" + bench + "-" + std::to_string(p);
    raw_ensure(*all.front(), path);
    for (int c = 0; c < per_path; ++c)
      contenders.push_back(std::make_unique<raw_contender>(raw_contender{
          all[(p * per_path + c) % sessions]->zh, path,
          path + "/_c_00000000-0000-4000-8000-" + std::to_string(100000000000 + c) + "-lock-", {}, {}, rounds,
          &running, &rec, {}}));
  }
  rec.start();
  for (auto& c : contenders) c->start();
  run_all_until(all, [&] { return running == 0; });
  rec.stop();
  rec.print(bench, "raw", static_cast<std::uint64_t>(paths) * per_path * rounds);
}

// One uncontended semaphore holder running Curator's steps, no pipelining:
// create a lock node, list `locks` (ours is the only one), create a lease
// node, list `leases` (at most max), delete the lock node: acquired; then
// delete the lease node: released.
struct raw_semaphore_holder {
  zhandle_t* zh;
  std::string path;
  std::size_t max_leases;
  int rounds_left;
  bool* finished;
  recorder* rec;
  std::string lock_node, lease_node;
  bench_clock::time_point started;

  static raw_semaphore_holder* self(const void* data) {
    return const_cast<raw_semaphore_holder*>(static_cast<const raw_semaphore_holder*>(data));
  }
  static void check(int rc, const char* what) {
    if (rc != ZOK) throw std::runtime_error(std::string("raw semaphore: ") + what + " failed: " + std::to_string(rc));
  }
  void start() {
    started = bench_clock::now();
    auto prefix = path + "/locks/_c_00000000-0000-4000-8000-000000000001-lock-";
    zoo_acreate(zh, prefix.c_str(), "bench", 5, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL | ZOO_SEQUENCE, on_locked, this);
  }
  static void on_locked(int rc, const char* value, const void* data) {
    check(rc, "lock create");
    self(data)->lock_node = value;
    zoo_aget_children(self(data)->zh, (self(data)->path + "/locks").c_str(), 0, on_locks, data);
  }
  static void on_locks(int rc, const String_vector* children, const void* data) {
    check(rc, "locks list");
    if (children->count != 1) throw std::runtime_error("raw semaphore: contended (one holder expected)");
    auto prefix = self(data)->path + "/leases/_c_00000000-0000-4000-8000-000000000001-lease-";
    zoo_acreate(self(data)->zh, prefix.c_str(), "bench", 5, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL | ZOO_SEQUENCE,
                on_leased, data);
  }
  static void on_leased(int rc, const char* value, const void* data) {
    check(rc, "lease create");
    self(data)->lease_node = value;
    zoo_aget_children(self(data)->zh, (self(data)->path + "/leases").c_str(), 0, on_leases, data);
  }
  static void on_leases(int rc, const String_vector* children, const void* data) {
    check(rc, "leases list");
    if (static_cast<std::size_t>(children->count) > self(data)->max_leases)
      throw std::runtime_error("raw semaphore: full");
    zoo_adelete(self(data)->zh, self(data)->lock_node.c_str(), -1, on_unlocked, data);
  }
  static void on_unlocked(int rc, const void* data) {
    check(rc, "lock delete");
    self(data)->rec->add_latency(bench_clock::now() - self(data)->started);
    zoo_adelete(self(data)->zh, self(data)->lease_node.c_str(), -1, on_released, data);
  }
  static void on_released(int rc, const void* data) {
    check(rc, "lease delete");
    if (--self(data)->rounds_left > 0) return self(data)->start();
    *self(data)->finished = true;
  }
};

constexpr std::size_t semaphore_leases = 4;

void raw_semaphore_scenario(const std::string& bench, const std::string& hosts, int rounds) {
  if (!dlock::bench::wanted(bench, "raw")) return;
  raw_session s(hosts);
  auto path = root + "/raw-" + bench;
  raw_ensure(s, path);
  for (auto child : {"/locks", "/leases"}) {
    bool done = false;
    zoo_acreate(s.zh, (path + child).c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0,
                [](int, const char*, const void* d) { *const_cast<bool*>(static_cast<const bool*>(d)) = true; }, &done);
    s.run_until([&] { return done; });
  }
  recorder rec;
  bool finished = false;
  raw_semaphore_holder holder{s.zh, path, semaphore_leases, rounds, &finished, &rec, {}, {}, {}};
  rec.start();
  holder.start();
  s.run_until([&] { return finished; });
  rec.stop();
  rec.print(bench, "raw", static_cast<std::uint64_t>(rounds));
}

// -------------------------------------------------------------- dlock ----

struct dlock_run {
  recorder* rec;
  int running = 0;
  asio::steady_timer* finished = nullptr;  // cancelled by the last contender
};

asio::awaitable<void> dlock_contender(dlock::zk::client& zk, std::string path, int rounds,
                                      std::shared_ptr<dlock_run> run) {
  dlock::zk::mutex m(zk, path);
  for (int i = 0; i < rounds; ++i) {
    auto started = bench_clock::now();
    co_await m.acquire();
    run->rec->add_latency(bench_clock::now() - started);
    co_await m.release();
  }
  if (--run->running == 0) run->finished->cancel();
}

asio::awaitable<void> ensure_node(dlock::zk::client& zk, std::string path) {
  auto [ec, c] = co_await zk.create(path, "", dlock::zk::create_mode::persistent, asio::as_tuple(asio::deferred));
  (void)ec;
  (void)c;
}

// `sessions` clients, a session each, all on the caller's executor (one thread).
// Reserved up front: the contenders hold references to them.
asio::awaitable<std::vector<dlock::zk::client>> connect_clients(std::string hosts, int sessions) {
  auto ex = co_await asio::this_coro::executor;
  dlock::zk::options opts;
  opts.hosts = hosts;
  opts.observer = dlock::bench::dlock_observer();
  std::vector<dlock::zk::client> clients;
  clients.reserve(sessions);
  for (int i = 0; i < sessions; ++i) clients.emplace_back(ex, opts);
  for (auto& zk : clients) co_await zk.connect();
  co_return clients;
}

// Connects, runs the contenders (contender i on session i mod `sessions`),
// closes: io.run() returns once every client is closed.
asio::awaitable<void> dlock_main(std::string bench, std::string hosts, int paths, int per_path, int rounds,
                                 int sessions) {
  auto ex = co_await asio::this_coro::executor;
  auto clients = co_await connect_clients(hosts, sessions);
  co_await ensure_node(clients.front(), root);
  for (int p = 0; p < paths; ++p)
    co_await ensure_node(clients.front(), root + "/dlock-" + bench + "-" + std::to_string(p));
  recorder rec;
  asio::steady_timer finished(ex, asio::steady_timer::time_point::max());
  auto run = std::make_shared<dlock_run>(dlock_run{&rec, paths * per_path, &finished});
  rec.start();
  for (int p = 0; p < paths; ++p)
    for (int c = 0; c < per_path; ++c)
      asio::co_spawn(ex,
                     dlock_contender(clients[(p * per_path + c) % sessions],
                                     root + "/dlock-" + bench + "-" + std::to_string(p), rounds, run),
                     asio::detached);
  auto [ec] = co_await finished.async_wait(asio::as_tuple(asio::deferred));
  (void)ec;
  rec.stop();
  rec.print(bench, dlock::bench::dlock_impl(), static_cast<std::uint64_t>(paths) * per_path * rounds);
  for (auto& zk : clients) co_await zk.close();
}

void dlock_scenario(const std::string& bench, const std::string& hosts, int paths, int per_path, int rounds,
                    int sessions = 1) {
  if (!dlock::bench::wanted(bench, dlock::bench::dlock_impl())) return;
  asio::io_context io(1);
  asio::co_spawn(io, dlock_main(bench, hosts, paths, per_path, rounds, sessions), asio::detached);
  io.run();
}

asio::awaitable<void> dlock_semaphore_main(std::string bench, std::string hosts, int rounds) {
  auto clients = co_await connect_clients(hosts, 1);
  auto& zk = clients.front();
  co_await ensure_node(zk, root);
  dlock::zk::semaphore pool(zk, root + "/dlock-" + bench, semaphore_leases);
  co_await pool.acquire();  // creates the parents, as the raw side's setup does
  co_await pool.release();
  recorder rec;
  rec.start();
  for (int i = 0; i < rounds; ++i) {
    auto started = bench_clock::now();
    co_await pool.acquire();
    rec.add_latency(bench_clock::now() - started);
    co_await pool.release();
  }
  rec.stop();
  rec.print(bench, dlock::bench::dlock_impl(), static_cast<std::uint64_t>(rounds));
  co_await zk.close();
}

void dlock_semaphore_scenario(const std::string& bench, const std::string& hosts, int rounds) {
  if (!dlock::bench::wanted(bench, dlock::bench::dlock_impl())) return;
  asio::io_context io(1);
  asio::co_spawn(io, dlock_semaphore_main(bench, hosts, rounds), asio::detached);
  io.run();
}

// ------------------------------------------------------------- memory ----

// Heap bytes in use: what the waiters hold, without the allocator's cached pages.
long heap_in_use() { return static_cast<long>(mallinfo2().uordblks); }

long rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

asio::awaitable<void> waiter(dlock::zk::mutex& m, std::shared_ptr<int> created) {
  ++*created;
  co_await m.acquire();
  co_await m.release();
}

asio::awaitable<void> memory_scenario(int waiters) {
  auto ex = co_await asio::this_coro::executor;
  dlock::zk::options opts;
  opts.hosts = standalone_hosts;
  dlock::zk::client zk(ex, opts);
  co_await zk.connect();
  co_await ensure_node(zk, root);
  auto path = root + "/memory";
  dlock::zk::mutex holder(zk, path);
  co_await holder.acquire();
  asio::steady_timer settle(ex);
  auto before = rss_bytes();
  auto heap_before = heap_in_use();
  std::vector<std::unique_ptr<dlock::zk::mutex>> mutexes;
  mutexes.reserve(waiters);
  auto created = std::make_shared<int>(0);
  // In batches: each new waiter lists every node before it, so starting all
  // at once would queue gigabytes of listings on the server.
  constexpr int batch = 200;
  for (int first = 0; first < waiters; first += batch) {
    for (int i = first; i < std::min(waiters, first + batch); ++i) {
      mutexes.push_back(std::make_unique<dlock::zk::mutex>(zk, path));
      asio::co_spawn(ex, waiter(*mutexes.back(), created), asio::detached);
    }
    for (;;) {
      std::size_t with_node = 0;
      for (auto& m : mutexes) with_node += !m->node_path().empty();
      if (with_node == mutexes.size()) break;
      settle.expires_after(std::chrono::milliseconds(50));
      co_await settle.async_wait(asio::deferred);
    }
  }
  settle.expires_after(std::chrono::seconds(2));
  co_await settle.async_wait(asio::deferred);
  auto after = rss_bytes();
  auto heap_after = heap_in_use();
  std::printf("{\"bench\":\"zk_waiting_memory\",\"impl\":\"dlock\",\"waiters\":%d,\"rss_delta_bytes\":%ld,"
              "\"heap_delta_bytes\":%ld,\"heap_bytes_per_waiter\":%.0f}\n",
              waiters, after - before, heap_after - heap_before,
              static_cast<double>(heap_after - heap_before) / waiters);
  std::fflush(stdout);
  co_await zk.close();  // fails the waiters (closed); the session's end removes every node
}

void dlock_memory(int waiters) {
  asio::io_context io(1);
  asio::co_spawn(io, memory_scenario(waiters), asio::detached);
  io.run();
}

}  // namespace

int main(int argc, char** argv) {
  std::string only = argc > 1 ? argv[1] : "";
  if (only.empty() || only == "zk_uncontended") {
    raw_scenario("zk_uncontended", standalone_hosts, 1, 1, 2000);
    dlock::bench::each_dlock_impl([&] { dlock_scenario("zk_uncontended", standalone_hosts, 1, 1, 2000); });
  }
  if (only.empty() || only == "zk_contended") {
    raw_scenario("zk_contended", standalone_hosts, 1, 16, 200);
    dlock::bench::each_dlock_impl([&] { dlock_scenario("zk_contended", standalone_hosts, 1, 16, 200); });
  }
  if (only.empty() || only == "zk_contended_sessions") {
    raw_scenario("zk_contended_sessions", standalone_hosts, 1, 16, 200, 16);
    dlock::bench::each_dlock_impl([&] { dlock_scenario("zk_contended_sessions", standalone_hosts, 1, 16, 200, 16); });
  }
  if (only.empty() || only == "zk_many_locks") {
    raw_scenario("zk_many_locks", standalone_hosts, 64, 1, 200);
    dlock::bench::each_dlock_impl([&] { dlock_scenario("zk_many_locks", standalone_hosts, 64, 1, 200); });
  }
  if (only.empty() || only == "zk_ensemble_uncontended") {
    if (ensemble_hosts.empty()) {
      std::fprintf(stderr, "zk_mutex: DLOCK_ZK_ENSEMBLE unset, zk_ensemble_uncontended skipped\n");
    } else {
      raw_scenario("zk_ensemble_uncontended", ensemble_hosts, 1, 1, 2000);
      dlock::bench::each_dlock_impl([&] { dlock_scenario("zk_ensemble_uncontended", ensemble_hosts, 1, 1, 2000); });
    }
  }
  if (only.empty() || only == "zk_semaphore_uncontended") {
    for (int round = 0; round < 3; ++round) {  // alternating: a burst of load hits both
      raw_semaphore_scenario("zk_semaphore_uncontended", standalone_hosts, 2000);
      dlock::bench::each_dlock_impl([&] {
        dlock_semaphore_scenario("zk_semaphore_uncontended", standalone_hosts, 2000);
      });
    }
  }
  if (only.empty() || only == "zk_waiting_memory") dlock_memory(argc > 2 ? std::atoi(argv[2]) : 10000);
  return 0;
}
