// dlock's events as Prometheus metrics. A `dlock::observer` feeds a
// prometheus-cpp registry, which prometheus-cpp's Exposer serves over HTTP.
// dlock itself knows nothing of Prometheus: this file is the whole adapter,
// to copy and adjust.
//
// The observer rides in the options of one ZooKeeper client and three Redis
// connections, so every lock and queue on them reports to it. The program
// drives a fixed amount of work: five contended redis::lock acquisitions,
// five contended zk::mutex acquisitions, five Redlock acquisitions over the
// three masters, one Redis lock lost on purpose (held past its TTL), one
// queue offer and take. Then it prints "driven" and serves the metrics until
// stdin is closed (Ctrl-D at a terminal), so that a scraper can check the
// figures: test/prometheus_scrape.py does, in the test suite.
//
// The first line printed is the endpoint, "metrics: http://127.0.0.1:<port>/metrics".
// DLOCK_METRICS_PORT picks the port (default 0: any free one).
#include "example_support.hpp"

#include <dlock/error.hpp>
#include <dlock/observer.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/stall_monitor.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/error.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/queue.hpp>

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/system/system_error.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <unistd.h>
#include <vector>

namespace asio = boost::asio;
namespace prom = prometheus;
namespace redis = dlock::redis;
namespace zk = dlock::zk;
using namespace std::chrono_literals;
using connections = std::vector<std::shared_ptr<redis::connection>>;

// ------------------------------------------------------------------ labels
// Each label takes a few fixed words, never a lock's name or path: one series
// per lock would grow without bound (and Prometheus keeps every series).

std::string_view outcome_label(const dlock::error_code& ec) {
  if (!ec) return "ok";
  if (ec == dlock::error::taken) return "taken";
  if (ec == dlock::condition::timed_out) return "timed_out";
  if (ec == dlock::error::no_quorum) return "no_quorum";
  if (ec == dlock::error::empty) return "empty";
  if (ec == asio::error::operation_aborted) return "cancelled";
  if (ec == dlock::condition::connection_lost) return "connection_loss";
  return "failed";
}

std::string_view loss_label(const dlock::error_code& reason) {
  if (reason == dlock::error::lost) return "lost";
  if (reason == zk::error::session_expired) return "session_expired";
  if (reason == dlock::condition::connection_lost) return "connection_loss";
  if (reason == dlock::error::stalled) return "stalled";
  return "other";
}

std::string_view answer_label(dlock::master_answer answer) {
  switch (answer) {
    case dlock::master_answer::yes: return "yes";
    case dlock::master_answer::taken: return "taken";
    case dlock::master_answer::failed: return "failed";
    case dlock::master_answer::timed_out: return "timed_out";
  }
  return "unknown";
}

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

// ------------------------------------------------------------------ series
// A family's series, made on first use and kept by their label values.
// Family::Add hashes the labels and takes the family's lock: here that is
// paid once per series, and each event costs a lookup in a small map. The
// mutex makes it safe for an observer shared by objects on several threads
// (a lock destroyed while held tells its end from the destructor's thread).
template <class Metric, std::size_t N>
class series {
 public:
  series(prom::Family<Metric>& family, std::array<std::string, N> label_names,
         prom::Histogram::BucketBoundaries buckets = {})
      : family_(family), names_(std::move(label_names)), buckets_(std::move(buckets)) {}

  Metric& get(const std::array<std::string_view, N>& values) {
    std::array<std::string, N> key;
    for (std::size_t i = 0; i < N; ++i) key[i] = values[i];
    std::lock_guard guard(mutex_);
    auto found = made_.find(key);
    if (found != made_.end()) return *found->second;
    prom::Labels labels;
    for (std::size_t i = 0; i < N; ++i) labels.emplace(names_[i], key[i]);
    Metric* made = nullptr;
    if constexpr (std::is_same_v<Metric, prom::Histogram>)
      made = &family_.Add(labels, buckets_);
    else
      made = &family_.Add(labels);
    made_.emplace(std::move(key), made);
    return *made;
  }

 private:
  prom::Family<Metric>& family_;
  std::array<std::string, N> names_;
  prom::Histogram::BucketBoundaries buckets_;  // histograms only
  std::mutex mutex_;
  std::map<std::array<std::string, N>, Metric*> made_;
};

// ---------------------------------------------------------------- observer

class prometheus_observer final : public dlock::observer {
 public:
  explicit prometheus_observer(std::shared_ptr<prom::Registry> registry)
      : registry_(std::move(registry)),
        acquire_wait_(family<prom::Histogram>("dlock_acquire_wait_seconds",
                                              "How long acquires waited, from the call to the outcome"),
                      {"kind", "outcome"}, {0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
        hold_(family<prom::Histogram>("dlock_hold_seconds", "How long locks were held, by how the hold ended"),
              {"kind", "how"}, {0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800}),
        acquisitions_(family<prom::Counter>("dlock_acquisitions_total", "Acquires finished, by outcome"),
                      {"kind", "outcome"}),
        acquiring_(family<prom::Gauge>("dlock_acquires_in_progress", "Acquires started, not finished yet"),
                   {"kind"}),
        losses_(family<prom::Counter>("dlock_losses_total", "Holds lost, by reason"), {"kind", "reason"}),
        extensions_(family<prom::Counter>("dlock_extensions_total", "Extensions of Redis holds, by outcome"),
                    {"kind", "outcome"}),
        votes_(family<prom::Counter>("dlock_redlock_votes_total", "Redlock masters' answers, per master"),
               {"master", "answer"}),
        reconnects_(family<prom::Counter>("dlock_redis_reconnects_total", "Redis connections made after the first"),
                    {"server"}),
        queue_ops_(family<prom::Counter>("dlock_queue_ops_total", "Queue offers and takes, by outcome"),
                   {"op", "outcome"}),
        stalls_(family<prom::Counter>("dlock_stalls_total", "Event loop stalls a stall_monitor saw").Add({})),
        zk_connected_(family<prom::Gauge>("dlock_zk_session_connected", "1 while the ZooKeeper session is up")
                          .Add({})) {}

  void on_acquire_started(const dlock::acquire_started& e) noexcept override {
    acquiring_.get({kind(e.lock)}).Increment();
  }

  void on_acquire_finished(const dlock::acquire_finished& e) noexcept override {
    auto outcome = outcome_label(e.outcome);
    acquiring_.get({kind(e.lock)}).Decrement();
    acquisitions_.get({kind(e.lock), outcome}).Increment();
    acquire_wait_.get({kind(e.lock), outcome}).Observe(seconds(e.waited));
  }

  void on_hold_ended(const dlock::hold_ended& e) noexcept override {
    bool lost = e.how == dlock::hold_end::lost;
    hold_.get({kind(e.lock), lost ? "lost" : "released"}).Observe(seconds(e.held_for));
    if (lost) losses_.get({kind(e.lock), loss_label(e.reason)}).Increment();
  }

  void on_extended(const dlock::extended& e) noexcept override {
    extensions_.get({kind(e.lock), outcome_label(e.outcome)}).Increment();
  }

  // A slow or failing master shows as its share of timed_out or failed answers.
  void on_redlock_round(const dlock::redlock_round& e) noexcept override {
    for (const auto& vote : e.masters) votes_.get({vote.master, answer_label(vote.answer)}).Increment();
  }

  // One client here: with several, label the gauge by `e.hosts`.
  void on_zk_session(const dlock::zk_session_changed& e) noexcept override {
    bool up = e.state == zk::session_state::connected || e.state == zk::session_state::reconnected;
    zk_connected_.Set(up ? 1 : 0);
  }

  void on_redis_connection(const dlock::redis_connection_changed& e) noexcept override {
    // Made at the server's first event, so that it shows 0 before any reconnect.
    auto& reconnects = reconnects_.get({e.server});
    if (e.state == redis::connection_state::connected && e.reconnects > 0) reconnects.Increment();
  }

  void on_queue_offered(const dlock::queue_offered& e) noexcept override {
    queue_ops_.get({"offer", outcome_label(e.outcome)}).Increment();
  }

  void on_queue_taken(const dlock::queue_taken& e) noexcept override {
    queue_ops_.get({"take", outcome_label(e.outcome)}).Increment();
  }

  void on_stall(const dlock::stall_detected&) noexcept override { stalls_.Increment(); }

 private:
  static std::string_view kind(const dlock::lock_id& lock) { return dlock::to_string(lock.kind); }

  template <class Metric>
  prom::Family<Metric>& family(const std::string& name, const std::string& help) {
    auto builder = [] {
      if constexpr (std::is_same_v<Metric, prom::Counter>) return prom::BuildCounter();
      else if constexpr (std::is_same_v<Metric, prom::Gauge>) return prom::BuildGauge();
      else return prom::BuildHistogram();
    };
    return builder().Name(name).Help(help).Register(*registry_);
  }

  std::shared_ptr<prom::Registry> registry_;  // first: the families below live in it
  series<prom::Histogram, 2> acquire_wait_;
  series<prom::Histogram, 2> hold_;
  series<prom::Counter, 2> acquisitions_;
  series<prom::Gauge, 1> acquiring_;
  series<prom::Counter, 2> losses_;
  series<prom::Counter, 2> extensions_;
  series<prom::Counter, 2> votes_;
  series<prom::Counter, 1> reconnects_;
  series<prom::Counter, 2> queue_ops_;
  prom::Counter& stalls_;
  prom::Gauge& zk_connected_;
};

// -------------------------------------------------------------------- work
// Named coroutines with by-value parameters: g++ 12 miscompiles some
// coroutine lambdas that capture.

// One of five contenders for one Redis key: waits its turn, holds briefly.
asio::awaitable<void> redis_contender(redis::connection* conn, std::string key) {
  redis::lock_options options;
  options.retry_delay = 20ms;  // a waiter tries again every 20 +- 10 ms
  options.retry_jitter = 10ms;
  redis::lock lock(*conn, key, options);
  co_await lock.acquire();
  co_await example::sleep_for(30ms);
  co_await lock.release();
}

// One of five contenders for one ZooKeeper mutex (they queue, no polling).
asio::awaitable<void> zk_contender(zk::client* client, std::string path) {
  zk::mutex lock(*client, path);
  co_await lock.acquire();
  co_await example::sleep_for(30ms);
  co_await lock.release();
}

// Five Redlock holds in a row: uncontended, so every master says yes in every
// round. The redlock takes its observer from the first master's connection.
asio::awaitable<void> redlock_holds(connections masters, std::string key) {
  redis::redlock_options options;
  options.master_timeout = 500ms;  // generous: a loaded machine must not miss a vote
  redis::redlock lock(co_await asio::this_coro::executor, masters, key, options);
  for (int i = 0; i < 5; ++i) {
    co_await lock.acquire();
    co_await lock.release();
  }
}

// A Redis lock lost on purpose: held past its 300 ms TTL with no extension.
// A local timer tells the loss when the validity runs out; the late release
// then reports it too.
asio::awaitable<void> forced_loss(redis::connection* conn, std::string key) {
  redis::lock_options options;
  options.ttl = 300ms;
  redis::lock lock(*conn, key, options);
  co_await lock.acquire();
  co_await example::sleep_for(600ms);
  auto [ec] = co_await lock.release(asio::as_tuple(asio::deferred));
  example::check(ec == dlock::error::lost, "the late release reports the loss");
}

asio::awaitable<void> queue_round_trip(zk::client* client, std::string path) {
  zk::queue queue(*client, path);
  co_await queue.offer("job");
  auto item = co_await queue.take();
  example::check(item == "job", "the item offered is the one taken");
}

// Deletes a node of ours, unless ZooKeeper's container reaper was first.
asio::awaitable<void> remove_node(zk::client* client, std::string path) {
  auto [ec] = co_await client->remove(path, -1, asio::as_tuple(asio::deferred));
  if (ec && ec != zk::error::no_node) throw boost::system::system_error(ec, "removing " + path);
}

// The fixed work whose figures test/prometheus_scrape.py checks: change one,
// change the other.
asio::awaitable<void> drive(zk::client* client, connections masters) {
  const auto base = example::unique("/dlock-examples/metrics");
  const auto key = example::unique("dlock-example-metrics");

  std::vector<asio::awaitable<void>> redis_contenders;
  for (int i = 0; i < 5; ++i) redis_contenders.push_back(redis_contender(masters[0].get(), key + "-lock"));
  co_await example::all_of(std::move(redis_contenders));

  std::vector<asio::awaitable<void>> zk_contenders;
  for (int i = 0; i < 5; ++i) zk_contenders.push_back(zk_contender(client, base + "/mutex"));
  co_await example::all_of(std::move(zk_contenders));

  co_await redlock_holds(masters, key + "-redlock");
  // A round is told once every master answered, which may be after the
  // release: the forced loss's 600 ms, beyond the 500 ms master timeout,
  // lets the last round settle before anyone scrapes.
  co_await forced_loss(masters[0].get(), key + "-lost");
  co_await queue_round_trip(client, base + "/queue");

  // Queue nodes are persistent, and the mutex's parents linger until reaped.
  co_await remove_node(client, base + "/queue");
  co_await remove_node(client, base + "/mutex");
  co_await remove_node(client, base);
}

// ------------------------------------------------------------------- main

asio::awaitable<connections> connect_masters(std::shared_ptr<dlock::observer> observer) {
  auto executor = co_await asio::this_coro::executor;
  connections masters;
  for (auto options : example::redis_masters()) {
    if (masters.size() == 3) break;
    options.observer = observer;
    masters.push_back(std::make_shared<redis::connection>(executor, options));
    co_await masters.back()->connect();
  }
  example::check(masters.size() == 3, "DLOCK_REDIS_MASTERS names at least three masters");
  co_return masters;
}

// Returns once stdin reaches EOF: the scraper closed it, or Ctrl-D.
asio::awaitable<void> stdin_closed() {
  int fd = ::dup(STDIN_FILENO);  // the descriptor object closes its own
  if (fd < 0) co_return;         // no stdin at all
  asio::posix::stream_descriptor in(co_await asio::this_coro::executor, fd);
  char buffer[256];
  for (;;) {
    auto [ec, n] = co_await in.async_read_some(asio::buffer(buffer), asio::as_tuple(asio::deferred));
    if (ec) co_return;  // asio::error::eof, or stdin failed: stop serving either way
  }
}

asio::awaitable<void> example_main() {
  auto registry = std::make_shared<prom::Registry>();
  auto metrics = std::make_shared<prometheus_observer>(registry);
  prom::Exposer exposer("127.0.0.1:" + example::env_or("DLOCK_METRICS_PORT", "0"));
  exposer.RegisterCollectable(registry);
  std::printf("metrics: http://127.0.0.1:%d/metrics\n", exposer.GetListeningPorts().at(0));
  std::fflush(stdout);

  auto executor = co_await asio::this_coro::executor;
  // Counts this event loop's stalls (dlock_stalls_total). Not given to the
  // client's or the connections' options, where the locks would also act on a
  // stall: a loaded test machine could then change the figures checked.
  dlock::stall_options report_only;
  report_only.observer = metrics;
  dlock::stall_monitor stalls(executor, report_only);

  auto session = example::zk_options();
  session.observer = metrics;
  zk::client client(executor, session);
  co_await client.connect();
  auto masters = co_await connect_masters(metrics);

  co_await drive(&client, masters);
  std::printf("driven\n");
  std::fflush(stdout);
  co_await stdin_closed();

  co_await client.close();
  for (auto& master : masters) master->close();
}

int main() { return example::run("prometheus_metrics", example_main); }
