// Producers and consumers over a ZooKeeper queue: two producers offer jobs,
// three consumers take them (each waits with one watch while the queue is
// empty, no polling), and each job reaches exactly one consumer. When the
// producers are done, one "stop" item per consumer ends the consumers.
//
// Basic mode: taking is "read, then delete", and a connection drop between
// the delete and its reply makes `take` fail with
// `dlock::error::removal_uncertain` (carrying the item). Where a job must be
// neither lost nor run twice, use `take_claimed()` + `ack()` instead.
// Exits 0 when every job was taken exactly once.
#include "example_support.hpp"

#include <dlock/zk/client.hpp>
#include <dlock/zk/queue.hpp>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace zk = dlock::zk;
using namespace std::chrono_literals;

constexpr int jobs_per_producer = 5;
constexpr int consumers = 3;

struct board {
  std::string path = example::unique("/dlock-examples/jobs");
  std::map<std::string, int> taken;  // job -> how many consumers got it
};

asio::awaitable<void> produce(zk::client* session, board* b, std::string producer) {
  zk::queue jobs(*session, b->path);
  for (int i = 1; i <= jobs_per_producer; ++i) {
    co_await jobs.offer(producer + "-job-" + std::to_string(i));
    co_await example::sleep_for(20ms);  // jobs trickle in: consumers wait in between
  }
}

asio::awaitable<void> consume(zk::client* session, board* b, std::string consumer) {
  zk::queue jobs(*session, b->path);
  int done = 0;
  for (;;) {
    std::string job = co_await jobs.take();  // waits while the queue is empty
    if (job == "stop") break;
    ++b->taken[job];
    ++done;
    co_await example::sleep_for(30ms);  // the work
  }
  std::printf("%s ran %d jobs\n", consumer.c_str(), done);
}

asio::awaitable<void> producers_then_stop(zk::client* session, board* b) {
  std::vector<asio::awaitable<void>> producers;
  producers.push_back(produce(session, b, "red"));
  producers.push_back(produce(session, b, "blue"));
  co_await example::all_of(std::move(producers));
  zk::queue jobs(*session, b->path);
  for (int i = 0; i < consumers; ++i) co_await jobs.offer("stop");  // FIFO: after every job
}

asio::awaitable<void> example_main() {
  // One session each for producers and consumers, as two services would have.
  auto executor = co_await asio::this_coro::executor;
  zk::client producing(executor, example::zk_options());
  zk::client consuming(executor, example::zk_options());
  co_await producing.connect();
  co_await consuming.connect();
  board b;

  std::vector<asio::awaitable<void>> everyone;
  everyone.push_back(producers_then_stop(&producing, &b));
  for (int i = 1; i <= consumers; ++i) everyone.push_back(consume(&consuming, &b, "consumer-" + std::to_string(i)));
  co_await example::all_of(std::move(everyone));

  example::check(b.taken.size() == 2 * jobs_per_producer, "every job was taken");
  for (auto& [job, count] : b.taken) example::check(count == 1, job + " was taken once");
  zk::queue jobs(consuming, b.path);
  example::check(co_await jobs.size() == 0, "the queue is empty");
  std::printf("%zu jobs, each taken by exactly one consumer\n", b.taken.size());
  co_await consuming.remove(b.path);  // queue nodes are persistent: tidy up
  co_await producing.close();
  co_await consuming.close();
}

int main() { return example::run("zk_queue_workers", example_main); }
