// The multi-threaded test: every lock on an io_context that four threads run,
// as the README allows ("its io_context may run on several threads"), while
// losses fire on the locks' strands. scripts/test also runs it built with
// ThreadSanitizer (label `threads`), where a data race fails it.
//
// Boost.Test is not thread-safe: the coroutines only count and record, on
// whatever thread they run; the checks run on the test's thread once the
// io_context threads are joined.
#include "common/servers.hpp"
#include "common/zk_cutting_proxy.hpp"
#include "integration/redlock_support.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/with_lock.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/leader_election.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/shared_mutex.hpp>
#include <dlock/zk/simple_lock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/test/unit_test.hpp>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using redlock_test::sleep_for;
using redlock_test::tuple_token;
namespace asio = boost::asio;
namespace redis = dlock::redis;
namespace zk = dlock::zk;

namespace {

constexpr int io_threads = 4;

// What the coroutines saw, shared by all of them, read by the test once the
// threads are joined.
struct observations {
  std::atomic<int> bodies{0};            // critical sections (or terms) entered
  std::atomic<int> completed{0};         // with_lock calls that returned normally
  std::atomic<int> losses{0};            // losses told to the holder
  std::atomic<int> other_failures{0};    // acquires that failed (connection cut)
  std::atomic<int> held_seen{0};         // bodies that saw held() true
  std::atomic<int> running{0};           // contenders still looping
  std::atomic<bool> stop{false};         // contenders: finish the current round and leave

  // Where each contender is (a string literal), for the watchdog's report
  // if a case hangs: an operation that never completes shows up here.
  static constexpr int max_contenders = 8;
  std::array<std::atomic<const char*>, max_contenders> where{};
  std::atomic<int> contenders{0};

  std::mutex mutex;
  std::set<std::thread::id> threads;     // where handlers ran
  std::vector<std::string> surprises;    // exceptions nobody expected

  // A slot for a new contender's whereabouts.
  std::atomic<const char*>* enrol(const char* name) {
    int slot = contenders++;
    if (slot >= max_contenders) throw std::logic_error("threads test: too many contenders");
    names[slot] = name;
    where[slot] = "started";
    return &where[slot];
  }
  std::array<std::atomic<const char*>, max_contenders> names{};

  void note_thread() {
    std::lock_guard lock(mutex);
    threads.insert(std::this_thread::get_id());
  }
  void surprise(std::string what) {
    std::lock_guard lock(mutex);
    surprises.push_back(std::move(what));
  }
  // The loss is a system_error from with_lock ("... the lock was lost"); a
  // failed acquire or release (the connection was cut) is another one.
  void count_failure(const boost::system::system_error& e) {
    if (std::string(e.what()).find("the lock was lost") != std::string::npos)
      ++losses;
    else
      ++other_failures;
  }
};

// A case runs for seconds (the cutting stops after at most 400 x 60 ms);
// past this, something never completed. The watchdog says where every
// contender is and aborts, rather than leave ctest to time out silently.
constexpr auto hang_limit = 180s;

void report_hang(const observations& seen) {
  std::fprintf(stderr, "threads: the case hung (%d contender(s) still running, stop %d, losses %d)\n",
               seen.running.load(), int(seen.stop.load()), seen.losses.load());
  for (int i = 0; i < seen.contenders && i < observations::max_contenders; ++i)
    std::fprintf(stderr, "  %s: %s\n", seen.names[i].load(), seen.where[i].load());
  std::fflush(stderr);
  std::abort();
}

// Runs `main` on `io` from `io_threads` threads and rethrows what it threw.
// Stops the io_context when `main` ends: `main` closes what it opened first.
void run_on_threads(asio::io_context& io, observations& seen, asio::awaitable<void> main) {
  std::exception_ptr failure;
  std::atomic<bool> finished{false};
  std::mutex done_mutex;
  std::condition_variable done;
  asio::co_spawn(io, std::move(main), [&](std::exception_ptr e) {
    failure = e;
    finished = true;
    io.stop();
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < io_threads; ++i) threads.emplace_back([&io] { io.run(); });
  std::thread watchdog([&] {
    std::unique_lock lock(done_mutex);
    if (!done.wait_for(lock, hang_limit, [&] { return io.stopped(); })) report_hang(seen);
  });
  for (auto& t : threads) t.join();
  {
    std::lock_guard lock(done_mutex);
    done.notify_all();
  }
  watchdog.join();
  BOOST_REQUIRE(finished.load());
  if (failure) std::rethrow_exception(failure);
  for (auto& s : seen.surprises) BOOST_ERROR("unexpected: " << s);
  BOOST_TEST_MESSAGE("bodies " << seen.bodies << ", completed " << seen.completed << ", losses " << seen.losses
                               << ", failed acquires " << seen.other_failures << ", threads "
                               << seen.threads.size());
  // g++ 12 + TSan, or a busy machine, could quietly leave one thread doing
  // everything: then this test would prove nothing about threads.
  BOOST_TEST(seen.threads.size() > 1u, "handlers ran on " << seen.threads.size() << " thread(s)");
}

// Waits until every contender has left its loop.
asio::awaitable<void> contenders_done(observations& seen) {
  while (seen.running > 0) co_await sleep_for(5ms);
}

// --- lock_loss alone: the lock's side on a strand, holders elsewhere ---

asio::awaitable<void> yield() {
  co_await asio::post(co_await asio::this_coro::executor, asio::deferred);
}

// A holder on the plain executor: waits for the loss (or the release).
asio::awaitable<void> loss_watcher(dlock::lock_loss* loss, observations* seen, int rounds) {
  for (int round = 0; round < rounds; ++round) {
    seen->note_thread();
    auto [ec] = co_await loss->wait(tuple_token);
    if (ec == dlock::error::lost) ++seen->losses;
    if (loss->lost()) ++seen->bodies;  // read while the strand may be firing
    co_await yield();
  }
  --seen->running;
}

// The lock: holds, loses and releases, over and over, on its strand.
asio::awaitable<void> loss_source(dlock::lock_loss* loss, observations* seen) {
  for (int hold = 0; seen->running > 1; ++hold) {  // until only this one is left
    loss->arm();
    co_await yield();
    if (hold % 2 == 0)
      loss->fire(dlock::error::lost);
    else
      loss->disarm();
    co_await yield();
  }
  --seen->running;
}

asio::awaitable<void> lock_loss_across_threads(observations* seen) {
  auto plain = co_await asio::this_coro::executor;
  auto strand = asio::make_strand(plain);
  dlock::lock_loss loss(strand);
  constexpr int watchers = 4;
  seen->running = watchers + 1;
  for (int i = 0; i < watchers; ++i) asio::co_spawn(plain, loss_watcher(&loss, seen, 400), asio::detached);
  asio::co_spawn(strand, loss_source(&loss, seen), asio::detached);
  co_await contenders_done(*seen);
}

// --- with_lock's own composition: the body here, the loss on a strand ---

// A lock with no server behind it, for with_lock alone: its loss lives on
// its strand, as every dlock lock's does. Acquire arms it, release disarms
// it, both on the strand.
class strand_lock {
 public:
  explicit strand_lock(asio::any_io_executor executor) : strand_(asio::make_strand(executor)), loss_(strand_) {}
  template <class Token>
  auto acquire(Token&& token) {
    return on_strand([](dlock::lock_loss& loss) { loss.arm(); }, std::forward<Token>(token));
  }
  template <class Token>
  auto release(Token&& token) {
    return on_strand([](dlock::lock_loss& loss) { loss.disarm(); }, std::forward<Token>(token));
  }
  dlock::lock_loss& loss() { return loss_; }
  asio::any_io_executor get_executor() const { return strand_; }

 private:
  template <class Action, class Token>
  auto on_strand(Action action, Token&& token) {
    return asio::async_initiate<Token, void(dlock::error_code)>(
        [this, action](auto handler) {
          asio::post(strand_, [this, action, handler = std::move(handler)]() mutable {
            action(loss_);
            auto executor = asio::get_associated_executor(handler, strand_);
            asio::post(executor, [handler = std::move(handler)]() mutable { handler(dlock::error_code{}); });
          });
        },
        token);
  }
  asio::any_io_executor strand_;
  dlock::lock_loss loss_;
};

// The body: short timer waits on the caller's (plain, multi-threaded)
// executor, so a loss often lands while one of them is completing.
asio::awaitable<void> short_waits(observations* seen) {
  seen->note_thread();
  ++seen->bodies;
  for (int i = 0; i < 10; ++i) co_await sleep_for(std::chrono::microseconds(100 * (i % 3)));
  seen->note_thread();
}

asio::awaitable<void> with_lock_rounds(strand_lock* lock, observations* seen, int rounds) {
  auto body = [seen] { return short_waits(seen); };
  for (int round = 0; round < rounds; ++round) {
    try {
      co_await dlock::with_lock(*lock, body);
      ++seen->completed;
    } catch (const boost::system::system_error& e) {
      seen->count_failure(e);
    } catch (const std::exception& e) {
      seen->surprise(e.what());
    }
  }
  --seen->running;
}

// Fires the lock's loss on its strand, now and then, until told to stop.
asio::awaitable<void> loss_firer(strand_lock* lock, observations* seen, std::atomic<int>* firing) {
  for (unsigned tick = 0; !seen->stop; ++tick) {
    co_await sleep_for(std::chrono::microseconds(500 + 2500 * (tick % 5)));  // 0.5 to 10.5 ms
    if (lock->loss().armed()) lock->loss().fire(dlock::error::lost);
  }
  --*firing;
}

asio::awaitable<void> with_lock_losses_across_threads(observations* seen) {
  auto plain = co_await asio::this_coro::executor;
  constexpr int holders = 4;
  std::vector<std::unique_ptr<strand_lock>> locks;
  std::atomic<int> firing{holders};
  seen->running = holders;
  for (int i = 0; i < holders; ++i) {
    locks.push_back(std::make_unique<strand_lock>(plain));
    asio::co_spawn(plain, with_lock_rounds(locks.back().get(), seen, 150), asio::detached);
    asio::co_spawn(locks.back()->get_executor(), loss_firer(locks.back().get(), seen, &firing), asio::detached);
  }
  co_await contenders_done(*seen);
  seen->stop = true;
  while (firing > 0) co_await sleep_for(1ms);
}

// --- ZooKeeper ---

// The critical section: reads the lock's state from the body's thread while
// the client's strand may be firing the loss.
template <class Lock>
asio::awaitable<void> zk_section(Lock* lock, observations* seen, std::atomic<const char*>* where) {
  *where = "in the body";
  seen->note_thread();
  ++seen->bodies;
  if (lock->held() && lock->fencing_token() <= 0) seen->surprise("held without a fencing token");
  co_await sleep_for(15ms);
  seen->note_thread();
  *where = "body done: releasing";
}

// with_lock in a loop, until told to stop; losses and failed acquires are
// expected (the connection is cut), anything else is not.
template <class Lock>
asio::awaitable<void> with_lock_loop(Lock* lock, observations* seen, const char* name) {
  auto where = seen->enrol(name);
  auto body = [lock, seen, where] { return zk_section(lock, seen, where); };
  while (!seen->stop) {
    bool failed = false;
    *where = "acquiring";
    try {
      co_await dlock::with_lock(*lock, body);
      ++seen->completed;
    } catch (const boost::system::system_error& e) {
      seen->count_failure(e);
      failed = true;
    } catch (const std::exception& e) {
      seen->surprise(e.what());
    }
    *where = "between rounds";
    if (failed) co_await sleep_for(5ms);  // the connection is being cut: not a busy loop
  }
  *where = "done";
  --seen->running;
}

// A candidate: leads for a short term, or until leadership is lost, then resigns.
asio::awaitable<void> campaign_loop(zk::leader_election* election, std::string id, observations* seen) {
  auto executor = co_await asio::this_coro::executor;
  auto where = seen->enrol(id == "one" ? "candidate one" : "candidate two");
  while (!seen->stop) {
    *where = "campaigning";
    auto [ec] = co_await election->campaign(id, tuple_token);
    *where = "campaign done";
    if (ec) {
      ++seen->other_failures;
      co_await sleep_for(5ms);
      continue;
    }
    seen->note_thread();
    ++seen->bodies;
    if (election->is_leader() && election->fencing_token() <= 0) seen->surprise("leader without a fencing token");
    // A term of office, then the loss (if any) read from this thread while the
    // client's strand may be firing it. Not a parallel group of the loss wait
    // and a timer: its branches would complete on two executors (the strand,
    // this multi-threaded one), which Asio's cancellation slots do not allow
    // (TSan saw the group's cancel race the timer's completion).
    asio::steady_timer term(executor, 15ms);
    *where = "in office";
    co_await term.async_wait(tuple_token);
    if (election->loss().lost()) ++seen->losses;
    *where = "resigning";
    co_await election->resign(tuple_token);
  }
  *where = "done";
  --seen->running;
}

// Cuts every connection through the proxy, again and again, until the
// holders were told `wanted` losses (or a generous number of cuts passed);
// then asks the contenders to stop.
asio::awaitable<void> keep_cutting(dlock::test::zk_cutting_proxy* proxy, observations* seen, int wanted) {
  for (int cut = 0; cut < 400 && seen->losses < wanted; ++cut) {
    co_await sleep_for(60ms);
    proxy->cut_all();  // blocks this thread briefly: the proxy runs on its own
  }
  seen->stop = true;
}

zk::options through(const dlock::test::zk_cutting_proxy& proxy) {
  return dlock::test::zk_options(proxy.address(), 10s);
}

std::string lock_path(const std::string& name) { return "/dlock-test/threads/" + dlock::test::unique_name(name); }

// Four contenders, one mutex object each, on one path; one client each, all
// through the proxy; every coroutine on the plain (multi-threaded) executor.
asio::awaitable<void> mutexes_under_cuts(dlock::test::zk_cutting_proxy* proxy, observations* seen) {
  auto executor = co_await asio::this_coro::executor;
  std::string path = lock_path("mutex");
  std::vector<std::unique_ptr<zk::client>> clients;
  std::vector<std::unique_ptr<zk::mutex>> locks;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(std::make_unique<zk::client>(executor, through(*proxy)));
    co_await clients.back()->connect();
    locks.push_back(std::make_unique<zk::mutex>(*clients.back(), path));
  }
  static constexpr const char* names[] = {"mutex one", "mutex two", "mutex three", "mutex four"};
  auto where = seen->enrol("the case");
  for (std::size_t i = 0; i < locks.size(); ++i) {
    ++seen->running;
    asio::co_spawn(executor, with_lock_loop(locks[i].get(), seen, names[i]), asio::detached);
  }
  asio::co_spawn(executor, keep_cutting(proxy, seen, 8), asio::detached);
  *where = "waiting for the contenders";
  co_await contenders_done(*seen);
  locks.clear();
  *where = "closing the clients";
  for (auto& c : clients) co_await c->close(tuple_token);
  *where = "done";
}

// The other recipes, side by side: a reader and a writer of one
// shared_mutex path, two simple_locks, two election candidates.
asio::awaitable<void> recipes_under_cuts(dlock::test::zk_cutting_proxy* proxy, observations* seen) {
  auto executor = co_await asio::this_coro::executor;
  zk::client first(executor, through(*proxy));
  zk::client second(executor, through(*proxy));
  co_await first.connect();
  co_await second.connect();
  std::string shared_path = lock_path("shared");
  std::string simple_path = lock_path("simple");
  std::string election_path = lock_path("election");
  zk::shared_mutex readers(first, shared_path);
  zk::shared_mutex writers(second, shared_path);
  zk::simple_lock simple1(first, simple_path);
  zk::simple_lock simple2(second, simple_path);
  zk::leader_election candidate1(first, election_path);
  zk::leader_election candidate2(second, election_path);

  seen->running = 6;
  asio::co_spawn(executor, with_lock_loop(&readers.reader(), seen, "reader"), asio::detached);
  asio::co_spawn(executor, with_lock_loop(&writers.writer(), seen, "writer"), asio::detached);
  asio::co_spawn(executor, with_lock_loop(&simple1, seen, "simple lock one"), asio::detached);
  asio::co_spawn(executor, with_lock_loop(&simple2, seen, "simple lock two"), asio::detached);
  asio::co_spawn(executor, campaign_loop(&candidate1, "one", seen), asio::detached);
  asio::co_spawn(executor, campaign_loop(&candidate2, "two", seen), asio::detached);
  asio::co_spawn(executor, keep_cutting(proxy, seen, 3), asio::detached);
  auto where = seen->enrol("the case");
  *where = "waiting for the contenders";
  co_await contenders_done(*seen);
  *where = "closing the first client";
  co_await first.close(tuple_token);
  *where = "closing the second client";
  co_await second.close(tuple_token);
  *where = "done";
}

// --- Redis ---

// A critical section that sometimes outlives the lock's validity, so the
// loss fires from the lock's timer (on the connection's strand) while the
// body runs on its own executor.
template <class Lock>
asio::awaitable<void> redis_section(Lock* lock, int round, observations* seen) {
  seen->note_thread();
  ++seen->bodies;
  if (lock->held()) ++seen->held_seen;  // read from the body's executor (a Redlock's loss clears it on the strand)
  co_await sleep_for(round % 3 == 0 ? 400ms : 10ms);
  seen->note_thread();
}

template <class Lock>
asio::awaitable<void> redis_rounds(Lock* lock, int rounds, observations* seen) {
  for (int round = 0; round < rounds; ++round) {
    auto body = [lock, round, seen] { return redis_section(lock, round, seen); };
    try {
      co_await dlock::with_lock(*lock, body);
      ++seen->completed;
    } catch (const boost::system::system_error& e) {
      seen->count_failure(e);
    } catch (const std::exception& e) {
      seen->surprise(e.what());
    }
  }
  --seen->running;
}

// Connections and locks on one strand; each lock used by one coroutine,
// either on that strand or on the plain multi-threaded executor.
asio::awaitable<void> redis_on_strands(observations* seen) {
  auto plain = co_await asio::this_coro::executor;
  auto strand = asio::make_strand(plain);
  auto masters = co_await redlock_test::connect_masters(strand, 5);
  redis::lock_options short_ttl{.ttl = 200ms, .wait = 5s};
  redis::lock on_strand(*masters[0], dlock::test::unique_name("threads-strand"), short_ttl);
  redis::lock from_plain(*masters[1], dlock::test::unique_name("threads-plain"), short_ttl);
  redis::redlock_options redlock_opts;
  redlock_opts.ttl = 300ms;
  redis::redlock quorum_from_plain(strand, {masters[2], masters[3], masters[4]},
                                   dlock::test::unique_name("threads-redlock-plain"), redlock_opts);
  redis::redlock quorum_on_strand(strand, {masters[2], masters[3], masters[4]},
                                  dlock::test::unique_name("threads-redlock-strand"), redlock_opts);

  constexpr int rounds = 12;
  seen->running = 4;
  asio::co_spawn(strand, redis_rounds(&on_strand, rounds, seen), asio::detached);
  asio::co_spawn(plain, redis_rounds(&from_plain, rounds, seen), asio::detached);
  asio::co_spawn(plain, redis_rounds(&quorum_from_plain, rounds, seen), asio::detached);
  asio::co_spawn(strand, redis_rounds(&quorum_on_strand, rounds, seen), asio::detached);
  co_await contenders_done(*seen);
  redlock_test::close_all(masters);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(threads)

BOOST_AUTO_TEST_CASE(lock_loss_fired_on_a_strand_awaited_from_other_threads) {
  asio::io_context io(io_threads);
  observations seen;
  run_on_threads(io, seen, lock_loss_across_threads(&seen));
  BOOST_TEST(seen.losses > 0, "some waits saw the loss");
}

BOOST_AUTO_TEST_CASE(with_lock_cancels_a_body_on_this_executor_for_a_loss_fired_on_the_locks_strand) {
  asio::io_context io(io_threads);
  observations seen;
  run_on_threads(io, seen, with_lock_losses_across_threads(&seen));
  BOOST_TEST(seen.losses > 0, "some bodies were cancelled by a loss");
  BOOST_TEST(seen.completed > 0, "some bodies ran to their end");
}

BOOST_AUTO_TEST_CASE(with_lock_on_zk_mutexes_while_the_connection_is_cut) {
  dlock::test::zk_cutting_proxy proxy(dlock::test::zk_hosts());
  asio::io_context io(io_threads);
  observations seen;
  run_on_threads(io, seen, mutexes_under_cuts(&proxy, &seen));
  BOOST_TEST(seen.completed > 0, "some critical sections ran to their end");
  BOOST_TEST(seen.losses > 0, "some holds were lost to a cut (else nothing fired the loss)");
}

BOOST_AUTO_TEST_CASE(shared_mutex_simple_lock_and_election_while_the_connection_is_cut) {
  dlock::test::zk_cutting_proxy proxy(dlock::test::zk_hosts());
  asio::io_context io(io_threads);
  observations seen;
  run_on_threads(io, seen, recipes_under_cuts(&proxy, &seen));
  BOOST_TEST(seen.bodies > 0);
  BOOST_TEST(seen.losses > 0, "some holds were lost to a cut (else nothing fired the loss)");
}

BOOST_AUTO_TEST_CASE(redis_locks_on_a_strand_used_from_strands_and_plain_executors) {
  asio::io_context io(io_threads);
  observations seen;
  run_on_threads(io, seen, redis_on_strands(&seen));
  BOOST_TEST(seen.completed > 0, "some critical sections ran to their end");
  BOOST_TEST(seen.losses > 0, "the long sections outlived the validity and were told");
}

BOOST_AUTO_TEST_SUITE_END()
