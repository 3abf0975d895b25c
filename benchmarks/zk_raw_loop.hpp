// The bare ZooKeeper C client (zookeeper_st) in its own minimal poll loop: the
// baseline dlock::zk::client is measured against. Shared by zk_raw and zk_client.
#pragma once

#include "common.hpp"

#include <zookeeper/zookeeper.h>

#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace dlock::bench::raw {

constexpr int rounds = 2000;
constexpr int in_flight = 64;

struct session {
  zhandle_t* zh = nullptr;
  bool connected = false;

  static void watcher(zhandle_t*, int type, int state, const char*, void* context) {
    if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) static_cast<session*>(context)->connected = true;
  }

  explicit session(const std::string& hosts) {
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zh = zookeeper_init(hosts.c_str(), &watcher, 10000, nullptr, this, 0);
    if (!zh) std::abort();
    zoo_set_servers_resolution_delay(zh, -1);  // the same setting dlock uses
    while (!connected) poll_once();
  }
  ~session() { zookeeper_close(zh); }

  /// One turn of the loop: interest, poll, process until nothing is left.
  void poll_once() {
    int fd = -1, interest = 0;
    timeval tv{};
    zookeeper_interest(zh, &fd, &interest, &tv);
    pollfd p{fd, 0, 0};
    if (interest & ZOOKEEPER_READ) p.events |= POLLIN;
    if (interest & ZOOKEEPER_WRITE) p.events |= POLLOUT;
    int timeout_ms = static_cast<int>(tv.tv_sec * 1000 + tv.tv_usec / 1000);
    if (fd < 0) {
      ::poll(nullptr, 0, timeout_ms);
      return;
    }
    if (::poll(&p, 1, timeout_ms) <= 0) return;
    int events = 0;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
    if (p.revents & POLLOUT) events |= ZOOKEEPER_WRITE;
    for (int i = 0; i < 64; ++i, events = ZOOKEEPER_READ)
      if (zookeeper_process(zh, events) != ZOK) break;
  }
};

/// One round: create ephemeral-sequential under `parent`, list `parent`, delete the node.
struct round {
  session* s = nullptr;
  std::string parent;
  int* finished = nullptr;
  int* started = nullptr;
  int limit = 0;
  recorder* rec = nullptr;
  clock::time_point began{};
  std::string node;
  bool done = false;

  void start() {
    if (*started >= limit) {
      done = true;
      return;
    }
    ++*started;
    began = clock::now();
    if (zoo_acreate(s->zh, (parent + "/n-").c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                    &on_created, this) != ZOK)
      std::abort();
  }
  static void on_created(int rc, const char* path, const void* context) {
    auto* r = static_cast<round*>(const_cast<void*>(context));
    if (rc != ZOK) std::abort();
    r->node = path;
    if (zoo_aget_children2(r->s->zh, r->parent.c_str(), 0, &on_children, r) != ZOK) std::abort();
  }
  static void on_children(int rc, const String_vector*, const Stat*, const void* context) {
    auto* r = static_cast<round*>(const_cast<void*>(context));
    if (rc != ZOK) std::abort();
    if (zoo_adelete(r->s->zh, r->node.c_str(), -1, &on_deleted, r) != ZOK) std::abort();
  }
  static void on_deleted(int rc, const void* context) {
    auto* r = static_cast<round*>(const_cast<void*>(context));
    if (rc != ZOK) std::abort();
    r->rec->add_latency(clock::now() - r->began);
    ++*r->finished;
    r->start();
  }
};

inline void blocking_create(session& s, const std::string& path) {
  bool done = false;
  zoo_acreate(s.zh, path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT,
              [](int, const char*, const void* d) { *static_cast<bool*>(const_cast<void*>(d)) = true; }, &done);
  while (!done) s.poll_once();
}

inline void blocking_delete(session& s, const std::string& path) {
  bool done = false;
  zoo_adelete(s.zh, path.c_str(), -1, [](int, const void* d) { *static_cast<bool*>(const_cast<void*>(d)) = true; },
              &done);
  while (!done) s.poll_once();
}

/// Runs `rounds` rounds with `parallel` of them in flight; prints one JSON line.
inline void run(const std::string& hosts, const char* bench, int parallel) {
  session s(hosts);
  std::string parent = "/dlock-bench-raw-" + std::to_string(::getpid()) + "-" + std::to_string(parallel);
  blocking_create(s, parent);
  recorder rec;
  int finished = 0, started = 0;
  std::vector<round> chains(static_cast<std::size_t>(parallel));
  rec.start();
  for (auto& r : chains) {
    r.s = &s;
    r.parent = parent;
    r.finished = &finished;
    r.started = &started;
    r.limit = rounds;
    r.rec = &rec;
    r.start();
  }
  while (finished < rounds) s.poll_once();
  rec.stop();
  rec.print(bench, "raw", static_cast<std::uint64_t>(rounds) * 3, "\"rounds\":" + std::to_string(rounds));
  blocking_delete(s, parent);
}

inline void run_all(const std::string& hosts) {
  run(hosts, "zk_ops_sequential", 1);
  run(hosts, "zk_ops_pipelined", in_flight);
}

}  // namespace dlock::bench::raw
