// Queue throughput: dlock::zk::queue against the bare C client doing the
// same recipe steps in its own poll loop, in one run.
//   zk_queue_offer  2,000 sequential offers (one persistent-sequential create each)
//   zk_queue_take   2,000 sequential takes of those items (list when the known
//                   list is used up, then get + delete per item)
#include <unistd.h>  // before zk_raw_loop.hpp, which uses getpid

#include "common.hpp"
#include "zk_raw_loop.hpp"

#include <dlock/zk/client.hpp>
#include <dlock/zk/queue.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <deque>
#include <string>

namespace asio = boost::asio;
namespace zk = dlock::zk;
using namespace dlock::bench;

namespace {

// `items` per measured run; a short untimed run of each side first warms the
// server's JIT, so neither side pays for it.
int items = 2000;

// ---- raw: the recipe's requests, each waited for in the minimal loop ----

struct wait_flag {
  bool done = false;
  int rc = 0;
  std::string text;
  std::vector<std::string> names;
  std::int32_t version = 0;
};

void raw_offer(raw::session& s, const std::string& path, const std::string& data) {
  wait_flag f;
  zoo_acreate(s.zh, (path + "/qn-").c_str(), data.data(), static_cast<int>(data.size()), &ZOO_OPEN_ACL_UNSAFE,
              ZOO_PERSISTENT_SEQUENTIAL,
              [](int rc, const char*, const void* c) {
                auto* w = static_cast<wait_flag*>(const_cast<void*>(c));
                w->rc = rc;
                w->done = true;
              },
              &f);
  while (!f.done) s.poll_once();
}

std::deque<std::string> raw_list(raw::session& s, const std::string& path) {
  wait_flag f;
  zoo_aget_children(s.zh, path.c_str(), 0,
                    [](int rc, const String_vector* v, const void* c) {
                      auto* w = static_cast<wait_flag*>(const_cast<void*>(c));
                      w->rc = rc;
                      for (int i = 0; rc == ZOK && i < v->count; ++i) w->names.emplace_back(v->data[i]);
                      w->done = true;
                    },
                    &f);
  while (!f.done) s.poll_once();
  std::sort(f.names.begin(), f.names.end());  // "qn-%010d": string order is sequence order here
  return {f.names.begin(), f.names.end()};
}

std::string raw_take(raw::session& s, const std::string& path, std::deque<std::string>& known) {
  for (;;) {
    if (known.empty()) known = raw_list(s, path);
    std::string node = path + "/" + known.front();
    known.pop_front();
    wait_flag got;
    zoo_aget(s.zh, node.c_str(), 0,
             [](int rc, const char* value, int length, const Stat* st, const void* c) {
               auto* w = static_cast<wait_flag*>(const_cast<void*>(c));
               w->rc = rc;
               if (rc == ZOK) {
                 w->text.assign(value ? value : "", value ? static_cast<std::size_t>(length) : 0);
                 w->version = st->version;
               }
               w->done = true;
             },
             &got);
    while (!got.done) s.poll_once();
    if (got.rc != ZOK) continue;
    wait_flag deleted;
    zoo_adelete(s.zh, node.c_str(), got.version,
                [](int rc, const void* c) {
                  auto* w = static_cast<wait_flag*>(const_cast<void*>(c));
                  w->rc = rc;
                  w->done = true;
                },
                &deleted);
    while (!deleted.done) s.poll_once();
    if (deleted.rc == ZOK) return got.text;
  }
}

void run_raw(const std::string& hosts) {
  raw::session s(hosts);
  std::string path = "/dlock-bench-queue-raw-" + std::to_string(::getpid());
  raw::blocking_create(s, path);
  recorder rec;
  rec.start();
  for (int i = 0; i < items; ++i) {
    auto began = clock::now();
    raw_offer(s, path, "item-" + std::to_string(i));
    rec.add_latency(clock::now() - began);
  }
  rec.stop();
  rec.print("zk_queue_offer", "raw", items);
  std::deque<std::string> known;
  rec.start();
  for (int i = 0; i < items; ++i) {
    auto began = clock::now();
    raw_take(s, path, known);
    rec.add_latency(clock::now() - began);
  }
  rec.stop();
  rec.print("zk_queue_take", "raw", items);
  raw::blocking_delete(s, path);
}

// ---- dlock ----

asio::awaitable<void> run_dlock(std::string hosts) {
  zk::options options;
  options.hosts = hosts;
  options.observer = dlock::bench::dlock_observer();
  zk::client c(co_await asio::this_coro::executor, options);
  co_await c.connect();
  std::string path = "/dlock-bench-queue-" + std::to_string(::getpid());
  zk::queue q(c, path);
  recorder rec;
  rec.start();
  for (int i = 0; i < items; ++i) {
    auto began = clock::now();
    std::string item = "item-" + std::to_string(i);
    co_await q.offer(item);
    rec.add_latency(clock::now() - began);
  }
  rec.stop();
  rec.print("zk_queue_offer", dlock::bench::dlock_impl(), items);
  rec.start();
  for (int i = 0; i < items; ++i) {
    auto began = clock::now();
    co_await q.take();
    rec.add_latency(clock::now() - began);
  }
  rec.stop();
  rec.print("zk_queue_take", dlock::bench::dlock_impl(), items);
  co_await c.remove(path);
  co_await c.close();
}

}  // namespace

void run_both(const std::string& hosts) {
  run_raw(hosts);
  dlock::bench::each_dlock_impl([&] {
    asio::io_context io;
    asio::co_spawn(io, run_dlock(hosts), [](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);
    });
    io.run();
  });
}

int main() {
  std::string hosts = env_or("DLOCK_ZK_HOSTS", "127.0.0.1:2181");
  items = 300;
  quiet = true;
  run_both(hosts);  // warm-up, not printed
  items = 2000;
  quiet = false;
  run_both(hosts);
}
