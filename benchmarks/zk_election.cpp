// Leader failover time: how long after the leader steps down (or its session
// ends) the next candidate knows it leads. dlock::zk::leader_election against
// the bare C client doing the same protocol (the follower watches the
// leader's node, lists again when it goes) in its own poll loop, in one run.
//   zk_election_resign        the leader resigns (deletes its node)
//   zk_election_session_loss  the leader's session is closed (the server drops its ephemeral node)
// ops = failovers; p50/p99 = failover latency.
#include <unistd.h>  // before zk_raw_loop.hpp, which uses getpid

#include "common.hpp"
#include "zk_raw_loop.hpp"

#include <dlock/zk/client.hpp>
#include <dlock/zk/leader_election.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <memory>
#include <string>

namespace asio = boost::asio;
namespace zk = dlock::zk;
using namespace dlock::bench;

namespace {

// A short untimed run of each side first warms the server's JIT.
int failovers = 200;

// ---- raw ----

// Drives several sessions from one thread: one poll over all their sockets.
void poll_sessions(std::initializer_list<raw::session*> sessions) {
  std::vector<pollfd> fds;
  std::vector<raw::session*> owners;
  int timeout_ms = 10;
  for (auto* s : sessions) {
    int fd = -1, interest = 0;
    timeval tv{};
    zookeeper_interest(s->zh, &fd, &interest, &tv);
    timeout_ms = std::min(timeout_ms, static_cast<int>(tv.tv_sec * 1000 + tv.tv_usec / 1000));
    if (fd < 0) continue;
    short events = 0;
    if (interest & ZOOKEEPER_READ) events |= POLLIN;
    if (interest & ZOOKEEPER_WRITE) events |= POLLOUT;
    fds.push_back({fd, events, 0});
    owners.push_back(s);
  }
  if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
  for (std::size_t i = 0; i < fds.size(); ++i) {
    int events = 0;
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
    if (fds[i].revents & POLLOUT) events |= ZOOKEEPER_WRITE;
    if (!events) continue;
    for (int n = 0; n < 64; ++n, events = ZOOKEEPER_READ)
      if (zookeeper_process(owners[i]->zh, events) != ZOK) break;
  }
}

struct candidate_state {
  std::string node;
  bool created = false;
  bool predecessor_gone = false;
  bool listed = false;
  bool leads = false;
};

void raw_create(raw::session& s, const std::string& path, candidate_state& c, std::initializer_list<raw::session*> all) {
  c = candidate_state{};
  zoo_acreate(s.zh, (path + "/n-").c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
              [](int rc, const char* p, const void* d) {
                auto* st = static_cast<candidate_state*>(const_cast<void*>(d));
                if (rc == ZOK) st->node = p;
                st->created = true;
              },
              &c);
  while (!c.created) poll_sessions(all);
}

// The follower: watch the predecessor with a get+watch.
void raw_watch(raw::session& s, const std::string& predecessor, candidate_state& c,
               std::initializer_list<raw::session*> all) {
  bool armed = false;
  zoo_awget(s.zh, predecessor.c_str(),
            [](zhandle_t*, int type, int, const char*, void* d) {
              if (type == ZOO_DELETED_EVENT) static_cast<candidate_state*>(d)->predecessor_gone = true;
            },
            &c,
            [](int, const char*, int, const Stat*, const void* d) { *static_cast<bool*>(const_cast<void*>(d)) = true; },
            &armed);
  while (!armed) poll_sessions(all);
}

// After the watch fired: list and check we are first.
void raw_confirm(raw::session& s, const std::string& path, candidate_state& c, std::initializer_list<raw::session*> all) {
  zoo_aget_children(s.zh, path.c_str(), 0,
                    [](int rc, const String_vector* v, const void* d) {
                      auto* st = static_cast<candidate_state*>(const_cast<void*>(d));
                      if (rc == ZOK && v->count > 0) {
                        std::vector<std::string> names(v->data, v->data + v->count);
                        std::sort(names.begin(), names.end());
                        st->leads = st->node.ends_with(names.front());
                      }
                      st->listed = true;
                    },
                    &c);
  while (!c.listed) poll_sessions(all);
}

void run_raw(const std::string& hosts, bool by_session_loss) {
  const char* bench = by_session_loss ? "zk_election_session_loss" : "zk_election_resign";
  std::string path = "/dlock-bench-election-raw-" + std::to_string(::getpid());
  raw::session follower_session(hosts);
  raw::blocking_create(follower_session, path);
  recorder rec;
  rec.start();
  for (int i = 0; i < failovers; ++i) {
    auto leader_session = std::make_unique<raw::session>(hosts);  // not timed below
    candidate_state leader, follower;
    raw_create(*leader_session, path, leader, {leader_session.get(), &follower_session});
    raw_create(follower_session, path, follower, {leader_session.get(), &follower_session});
    raw_watch(follower_session, leader.node, follower, {leader_session.get(), &follower_session});
    auto began = clock::now();
    if (by_session_loss) {
      leader_session.reset();  // zookeeper_close: the server drops the ephemeral node
    } else {
      zoo_adelete(leader_session->zh, leader.node.c_str(), -1, [](int, const void*) {}, nullptr);
    }
    while (!follower.predecessor_gone) {
      if (leader_session) poll_sessions({leader_session.get(), &follower_session});
      else poll_sessions({&follower_session});
    }
    if (leader_session) raw_confirm(follower_session, path, follower, {leader_session.get(), &follower_session});
    else raw_confirm(follower_session, path, follower, {&follower_session});
    rec.add_latency(clock::now() - began);
    if (!follower.leads) std::abort();
    bool deleted = false;
    zoo_adelete(follower_session.zh, follower.node.c_str(), -1,
                [](int, const void* d) { *static_cast<bool*>(const_cast<void*>(d)) = true; }, &deleted);
    while (!deleted) poll_sessions({&follower_session});
  }
  rec.stop();
  rec.print(bench, "raw", failovers);
  raw::blocking_delete(follower_session, path);
}

// ---- dlock ----

asio::awaitable<void> run_dlock(std::string hosts, bool by_session_loss) {
  const char* bench = by_session_loss ? "zk_election_session_loss" : "zk_election_resign";
  auto ex = co_await asio::this_coro::executor;
  zk::options options;
  options.hosts = hosts;
  options.observer = dlock::bench::dlock_observer();
  std::string path = "/dlock-bench-election-" + std::to_string(::getpid());
  zk::client follower_client(ex, options);
  co_await follower_client.connect();
  recorder rec;
  rec.start();
  for (int i = 0; i < failovers; ++i) {
    auto leader_client = std::make_unique<zk::client>(ex, options);
    co_await leader_client->connect();
    zk::leader_election leader(*leader_client, path), follower(follower_client, path);
    co_await leader.campaign("leader");
    bool follower_leads = false;
    clock::time_point led_at{};
    follower.campaign("follower", [&](dlock::error_code ec) {
      follower_leads = !ec;
      led_at = clock::now();  // the failover ends here, not when the loop below notices
    });
    // Wait until the follower's node exists and it is waiting (two candidates listed).
    for (;;) {
      auto children = co_await follower_client.get_children(path);
      if (std::get<0>(children).size() == 2) break;
    }
    auto began = clock::now();
    if (by_session_loss) co_await leader_client->close();
    else co_await leader.resign();
    asio::steady_timer tick(ex);
    while (!follower_leads) {
      tick.expires_after(std::chrono::microseconds(50));
      co_await tick.async_wait(asio::deferred);
    }
    rec.add_latency(led_at - began);
    co_await follower.resign();
  }
  rec.stop();
  rec.print(bench, dlock::bench::dlock_impl(), failovers);
  co_await follower_client.remove(path);
  co_await follower_client.close();
}

void run_both(const std::string& hosts, bool by_session_loss) {
  run_raw(hosts, by_session_loss);
  dlock::bench::each_dlock_impl([&] {
    asio::io_context io;
    asio::co_spawn(io, run_dlock(hosts, by_session_loss), [](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);
    });
    io.run();
  });
}

}  // namespace

int main() {
  std::string hosts = env_or("DLOCK_ZK_HOSTS", "127.0.0.1:2181");
  failovers = 30;
  quiet = true;
  run_both(hosts, false);  // warm-up, not printed
  failovers = 200;
  quiet = false;
  run_both(hosts, false);
  run_both(hosts, true);
}
