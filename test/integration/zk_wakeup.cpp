// Every wait has a wake-up (issue #31, reproduction 3): a waiter whose
// predecessor's node is gone is told, or looks again, within a bounded time.
//
// Three clients on one io_context (holder A, waiter B, an observer), session
// timeout 4 s. A holds; A's session is ended on the server by a twin handle
// (dlock::test::expire_session: a forced expiry, which deletes A's nodes as
// the server applies the close); B asks for the same lock, either after the
// expiry or while already waiting behind A. B must complete within
// `wake_limit`: it is a liveness check, the bound is generous on purpose.
//
// Each scenario runs `runs()` times (DLOCK_WAKEUP_RUNS, default 12): the
// failure is intermittent (4 of 12 runs of the mutex in the issue).
#include "common/servers.hpp"
#include "common/zk.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/error.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/leader_election.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/queue.hpp>
#include <dlock/zk/semaphore.hpp>
#include <dlock/zk/shared_mutex.hpp>
#include <dlock/zk/simple_lock.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace zk = dlock::zk;
namespace bdata = boost::unit_test::data;
using dlock::error_code;
using dlock::test::sleep_for;
using dlock::test::with_ec;
using dlock::test::zk_options;
using namespace std::chrono_literals;

namespace {

constexpr auto short_session = 4s;
constexpr auto wake_limit = 10s;  // B must complete within this, once A's nodes are gone

int runs() {
  const char* text = std::getenv("DLOCK_WAKEUP_RUNS");
  int n = text ? std::atoi(text) : 0;
  return n > 0 ? n : 12;
}

// What one party does with the lock.
enum class kind { mutex, reader, writer, simple, election, semaphore, claim, take };

const char* name_of(kind k) {
  switch (k) {
    case kind::mutex: return "mutex";
    case kind::reader: return "reader";
    case kind::writer: return "writer";
    case kind::simple: return "simple_lock";
    case kind::election: return "election";
    case kind::semaphore: return "semaphore";
    case kind::claim: return "take_claimed";
    case kind::take: return "take";
  }
  return "?";
}

// When B starts: as soon as a twin handle's close of A's session returned
// (A may not know yet), once A saw its session end, or already waiting behind A.
enum class start { after_twin_close, after_expiry, while_waiting };

struct scenario {
  kind holder;
  kind waiter;
  start when;
};

std::string to_text(const scenario& s) {
  std::ostringstream os;
  os << name_of(s.waiter) << " behind " << name_of(s.holder) << ", "
            << (s.when == start::after_twin_close ? "started after the twin's close"
                : s.when == start::after_expiry   ? "started after the expiry"
                                                  : "waiting through the expiry");
  return os.str();
}

// One party's recipe object (whichever the kind needs).
struct party {
  std::unique_ptr<zk::mutex> mutex;
  std::unique_ptr<zk::shared_mutex> rw;
  std::unique_ptr<zk::simple_lock> simple;
  std::unique_ptr<zk::leader_election> election;
  std::unique_ptr<zk::semaphore> semaphore;
  std::unique_ptr<zk::queue> queue;
  std::optional<zk::claimed_item> claimed;
};

std::shared_ptr<party> make_party(kind k, zk::client& c, const std::string& path) {
  auto p = std::make_shared<party>();
  switch (k) {
    case kind::mutex: p->mutex = std::make_unique<zk::mutex>(c, path); break;
    case kind::reader:
    case kind::writer: p->rw = std::make_unique<zk::shared_mutex>(c, path); break;
    case kind::simple: p->simple = std::make_unique<zk::simple_lock>(c, path); break;
    case kind::election: p->election = std::make_unique<zk::leader_election>(c, path); break;
    case kind::semaphore: p->semaphore = std::make_unique<zk::semaphore>(c, path, 1); break;
    case kind::claim:
    case kind::take: p->queue = std::make_unique<zk::queue>(c, path); break;
  }
  return p;
}

// Takes the lock (or the item) for `k`; returns the operation's error.
asio::awaitable<error_code> engage(kind k, std::shared_ptr<party> p) {
  switch (k) {
    case kind::mutex: co_return std::get<0>(co_await p->mutex->acquire(with_ec));
    case kind::reader: co_return std::get<0>(co_await p->rw->reader().acquire(with_ec));
    case kind::writer: co_return std::get<0>(co_await p->rw->writer().acquire(with_ec));
    case kind::simple: co_return std::get<0>(co_await p->simple->acquire(with_ec));
    case kind::election: co_return std::get<0>(co_await p->election->campaign("candidate", with_ec));
    case kind::semaphore: co_return std::get<0>(co_await p->semaphore->acquire(with_ec));
    case kind::claim: {
      auto [ec, item] = co_await p->queue->take_claimed(with_ec);
      if (!ec) p->claimed = std::move(item);
      co_return ec;
    }
    case kind::take: co_return std::get<0>(co_await p->queue->take(with_ec));
  }
  co_return error_code{};
}

// Lets go of what `engage` took (errors ignored: the test's cleanup).
asio::awaitable<void> disengage(kind k, std::shared_ptr<party> p) {
  switch (k) {
    case kind::mutex: co_await p->mutex->release(with_ec); break;
    case kind::reader: co_await p->rw->reader().release(with_ec); break;
    case kind::writer: co_await p->rw->writer().release(with_ec); break;
    case kind::simple: co_await p->simple->release(with_ec); break;
    case kind::election: co_await p->election->resign(with_ec); break;
    case kind::semaphore: co_await p->semaphore->release(with_ec); break;
    case kind::claim:
      if (p->claimed) co_await p->queue->ack(*p->claimed, with_ec);
      break;
    case kind::take: break;
  }
}

struct outcome {
  bool done = false;
  error_code ec;
  asio::cancellation_signal stop;  // here, so it lives as long as the operation it may cancel
};

asio::awaitable<void> engage_into(kind k, std::shared_ptr<party> p, std::shared_ptr<outcome> out) {
  out->ec = co_await engage(k, p);
  out->done = true;
}

asio::awaitable<bool> wait_done(std::shared_ptr<outcome> out, std::chrono::steady_clock::duration limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!out->done && std::chrono::steady_clock::now() < until) co_await sleep_for(10ms);
  co_return out->done;
}

// What the servers hold under `path`, for the failure message.
asio::awaitable<std::string> describe(zk::client& observer, std::string path) {
  std::ostringstream text;
  std::vector<std::string> paths{path, path + ".claims", path + "/locks", path + "/leases"};
  for (const auto& p : paths) {
    auto [ec, children, st] = co_await observer.get_children(p, with_ec);
    if (ec) continue;
    text << p << ": [";
    for (const auto& child : children) text << ' ' << child;
    text << " ] ";
  }
  co_return text.str();
}

// One attempt of expire_session: a second handle opens A's session and closes it.
asio::awaitable<void> close_as_twin(zk::client& victim, zk::options base) {
  base.session_id = victim.session_id();
  base.session_password = victim.session_password();
  base.reopen_on_expiry = false;
  zk::client twin(co_await asio::this_coro::executor, base);
  co_await twin.connect(with_ec);
  co_await twin.close(with_ec);
}

bool is_queue(kind k) { return k == kind::claim || k == kind::take; }

// One run of `s`. Returns false (with a message) when B slept through the free lock.
asio::awaitable<bool> one_run(scenario s, int run_number) {
  auto ex = co_await asio::this_coro::executor;
  auto hosts = dlock::test::zk_hosts();
  auto opts = zk_options(hosts, short_session);
  // The setting: A, B and the twin handle, no other client on the
  // io_context while B waits (the observer connects afterwards).
  zk::client a(ex, opts), b(ex, opts), observer(ex, opts);
  co_await a.connect();
  co_await b.connect();
  auto path = "/dlock-test/wakeup/" + dlock::test::unique_name(name_of(s.waiter));

  auto holder = make_party(s.holder, a, path);
  auto waiter = make_party(s.waiter, b, path);
  if (s.holder == kind::claim) {
    zk::queue feeder(b, path);
    co_await feeder.offer("item");
  }
  // A `take` holder only has a session (the queue's waiter needs nobody ahead of it).
  if (s.holder != kind::take)
    BOOST_REQUIRE_MESSAGE(!co_await engage(s.holder, holder), "A takes " << name_of(s.holder));

  auto out = std::make_shared<outcome>();
  auto spawn_waiter = [&] {
    asio::co_spawn(ex, engage_into(s.waiter, waiter, out),
                   asio::bind_cancellation_slot(out->stop.slot(), asio::detached));
  };
  if (s.when == start::while_waiting) {
    spawn_waiter();
    co_await sleep_for(300ms);
    BOOST_REQUIRE_MESSAGE(!out->done, "B waits while A holds: " << out->ec.message());
  }
  if (s.when == start::after_twin_close) {
    co_await close_as_twin(a, opts);
    spawn_waiter();
  }
  BOOST_REQUIRE(co_await dlock::test::expire_session(a, opts));
  if (s.when == start::after_expiry) spawn_waiter();
  if (s.waiter == kind::take) {  // B waits on an empty queue: an item comes after the expiry
    zk::queue feeder(b, path);
    co_await feeder.offer("item");
  }

  bool woke = co_await wait_done(out, wake_limit);
  co_await observer.connect();
  if (!woke) {
    BOOST_ERROR("run " << run_number << ": B's " << name_of(s.waiter) << " did not complete within "
                       << wake_limit.count() << " s; B's session " << zk::to_string(b.state()) << "; "
                       << co_await describe(observer, path));
    out->stop.emit(asio::cancellation_type::terminal);
    co_await wait_done(out, wake_limit);
  } else {
    BOOST_CHECK_MESSAGE(!out->ec, "run " << run_number << ": B's " << name_of(s.waiter) << ": " << out->ec.message());
    co_await disengage(s.waiter, waiter);
  }
  holder.reset();
  waiter.reset();
  co_await a.close(with_ec);
  co_await b.close(with_ec);
  co_await dlock::test::delete_tree(observer, path);
  if (is_queue(s.waiter)) co_await dlock::test::delete_tree(observer, path + ".claims");
  co_await observer.close(with_ec);
  co_return woke;
}

asio::awaitable<void> repeat(scenario s) {
  int slept = 0, n = runs();
  for (int i = 1; i <= n; ++i)
    if (!co_await one_run(s, i)) ++slept;
  BOOST_TEST_MESSAGE(to_text(s) << ": B slept through a free lock in " << slept << " of " << n << " runs");
  BOOST_TEST(slept == 0);
}

const scenario scenarios[] = {
    {kind::mutex, kind::mutex, start::after_twin_close},
    {kind::mutex, kind::mutex, start::after_expiry},
    {kind::mutex, kind::mutex, start::while_waiting},
    {kind::writer, kind::writer, start::after_expiry},
    {kind::writer, kind::reader, start::while_waiting},
    {kind::reader, kind::writer, start::while_waiting},
    {kind::simple, kind::simple, start::after_expiry},
    {kind::simple, kind::simple, start::while_waiting},
    {kind::election, kind::election, start::after_expiry},
    {kind::election, kind::election, start::while_waiting},
    {kind::semaphore, kind::semaphore, start::after_expiry},
    {kind::semaphore, kind::semaphore, start::while_waiting},
    {kind::claim, kind::claim, start::after_expiry},
    {kind::claim, kind::claim, start::while_waiting},
    {kind::take, kind::take, start::while_waiting},
};

}  // namespace

BOOST_TEST_DONT_PRINT_LOG_VALUE(scenario)

BOOST_AUTO_TEST_SUITE(zk_wakeup)

BOOST_DATA_TEST_CASE(a_waiter_wakes_once_the_holders_session_is_closed_by_a_twin, bdata::make(scenarios), s) {
  BOOST_TEST_MESSAGE(to_text(s));
  asio::io_context io;
  dlock::test::run_coroutine(io, repeat(s));
}

BOOST_AUTO_TEST_SUITE_END()
