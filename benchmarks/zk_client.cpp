// The same rounds as zk_raw (create ephemeral-sequential, list the parent,
// delete), through dlock::zk::client; prints the raw baseline from the same run too.
#include "zk_raw_loop.hpp"

#include <dlock/zk/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <unistd.h>

namespace asio = boost::asio;
namespace zk = dlock::zk;
using bench_clock = dlock::bench::clock;

namespace {

struct shared_state {
  zk::client* client;
  std::string parent;
  int started = 0;
  int finished = 0;
  dlock::bench::recorder* rec;
  asio::steady_timer* all_done;  // cancelled by the last round: a condition variable
};

asio::awaitable<void> chain(shared_state& s) {
  std::string prefix = s.parent + "/n-";
  while (s.started < dlock::bench::raw::rounds) {
    ++s.started;
    auto began = bench_clock::now();
    auto made = co_await s.client->create(prefix, std::string(), zk::create_mode::ephemeral_sequential);
    co_await s.client->get_children(s.parent);
    co_await s.client->remove(std::move(made.path));
    s.rec->add_latency(bench_clock::now() - began);
    if (++s.finished == dlock::bench::raw::rounds) s.all_done->cancel();
  }
}

asio::awaitable<void> run(zk::client& client, const char* bench, int parallel) {
  co_await client.connect();
  asio::steady_timer all_done(client.get_executor(), bench_clock::time_point::max());
  dlock::bench::recorder rec;
  shared_state s{&client, "/dlock-bench-dlock-" + std::to_string(::getpid()) + "-" + std::to_string(parallel), 0, 0,
                 &rec, &all_done};
  co_await client.create(s.parent, std::string());
  rec.start();
  // Each chain runs on the client's strand: the cheapest place to initiate from.
  for (int i = 0; i < parallel; ++i) asio::co_spawn(client.get_executor(), chain(s), asio::detached);
  co_await all_done.async_wait(asio::as_tuple(asio::deferred));
  rec.stop();
  rec.print(bench, dlock::bench::dlock_impl(), static_cast<std::uint64_t>(dlock::bench::raw::rounds) * 3,
            "\"rounds\":" + std::to_string(dlock::bench::raw::rounds));
  co_await client.remove(s.parent);
  co_await client.close();
}

void run_dlock(const std::string& hosts, const char* bench, int parallel) {
  asio::io_context io(1);
  zk::options options;
  options.hosts = hosts;
  options.observer = dlock::bench::dlock_observer();
  zk::client client(io.get_executor(), options);
  asio::co_spawn(client.get_executor(), run(client, bench, parallel), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  io.run();
}

}  // namespace

int main() {
  auto hosts = dlock::bench::env_or("DLOCK_ZK_HOSTS", "127.0.0.1:2181");
  dlock::bench::raw::run(hosts, "zk_ops_sequential", 1);
  dlock::bench::each_dlock_impl([&] { run_dlock(hosts, "zk_ops_sequential", 1); });
  dlock::bench::raw::run(hosts, "zk_ops_pipelined", dlock::bench::raw::in_flight);
  dlock::bench::each_dlock_impl([&] { run_dlock(hosts, "zk_ops_pipelined", dlock::bench::raw::in_flight); });
  return 0;
}
