// Fault injection at every step of the ZooKeeper recipes (safety issue:
// "fault injection at every step"): the locks, the election, the semaphore
// (one lease) and the queue. Each recipe's scenario runs once through
// a zk_cutting_proxy to count its requests, then once per step k with a fault
// at request k:
//   cut             the request is forwarded and the connection cut at once;
//   reply lost      the request is applied, the connection cut before its reply;
//   reply late      every reply from request k on is held past the client's
//                   receive timeout (2/3 of the session timeout): the client
//                   drops the connection and reconnects, the session lives;
//   session expired the replies are held from request k on and the session is
//                   expired meanwhile (a twin handle opens and closes it);
//   client pause    the client's own io_context is blocked once request k
//                   went out, for less than the receive timeout (a GC-like
//                   pause, a long handler);
//   client stall    the same for longer than the session timeout: no ping
//                   goes out, the servers expire the session, and the client
//                   learns it only when it runs again (issue #31: time
//                   inside the client).
// After each operation a second, direct client checks the invariants: at most
// one holder; held() only if the server has our node; no node of ours left
// once an operation has completed (polled, bounded: the recipes clean up in
// the background after a connection loss); the error is a truthful one.
//
// The cuts run at every step of every recipe. The slow faults (late reply,
// expiry: each waits out a timeout) run at every other step, the recipes
// alternating which (see sampler()): the mutex and the read lock take the
// same steps, so between them every step meets every fault; so do the write
// lock and the election. DLOCK_STEPS_EVERY_FAULT=1 runs them all.
//
// Only proxies, no server kills: an integration test, running with the others.
// One recipe alone: integration_steps_zk --run_test=steps_zk/<case> --log_level=message
// (the log names every run: recipe, step, fault, and its duration).
#include "common/servers.hpp"
#include "common/step_faults.hpp"
#include "common/zk.hpp"
#include "common/zk_cutting_proxy.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/error.hpp>
#include <dlock/lock_loss.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/error.hpp>
#include <dlock/zk/leader_election.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/queue.hpp>
#include <dlock/zk/semaphore.hpp>
#include <dlock/zk/shared_mutex.hpp>
#include <dlock/zk/simple_lock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace dlock;
using namespace std::chrono_literals;
using dlock::test::sleep_for;
using dlock::test::with_ec;
using dlock::test::step_outcome;
using dlock::test::zk_cutting_proxy;
namespace zk_opcode = dlock::test::zk_opcode;

namespace {


// The servers' tickTime is 500 ms: 2 s is within [2, 20] x tickTime, and the
// client's receive timeout is then 2/3 of it.
constexpr auto session_timeout = 2000ms;
constexpr auto late_reply_hold = 1800ms;  // past the receive timeout (~1333 ms)
// How long the checks wait for background cleanup (a release retried after a
// reconnection, ephemeral nodes of an expired session).
constexpr auto cleanup_patience = 8s;

constexpr auto short_pause = 1000ms;  // below the receive timeout
constexpr auto long_pause = 3000ms;   // past the session timeout
// The checking client shares the io_context, so it is paused too: its
// receive timeout (2/3 of this) outlasts the stall.
constexpr auto checker_session_timeout = 8000ms;

enum class fault { cut, reply_lost, reply_late, session_expired, client_pause, client_stall };
const std::vector<std::string> fault_names = {"cut",          "reply lost",  "reply late", "session expired",
                                              "client pause", "client stall"};

// What one run asks for: no fault (k == 0) or `kind` at request k.
struct plan {
  int step = 0;
  fault kind = fault::cut;
};

struct run_result {
  int steps = 0;      // requests forwarded from arming to the end
  bool fired = false;  // the fault was injected
};

const std::string& base_path() {
  static const std::string path = "/dlock-test/steps";
  return path;
}

asio::awaitable<void> ensure_base(zk::client& direct) {
  co_await direct.create("/dlock-test", "", zk::create_mode::persistent, with_ec);
  co_await direct.create(base_path(), "", zk::create_mode::persistent, with_ec);
}

// A trigger on an opcode no request has: what a run armed and did not reach
// must not fire in the next run.
void disarm(zk_cutting_proxy& proxy) { proxy.hold_replies(-100, 0ms); }

void arm(zk_cutting_proxy& proxy, const plan& p, asio::any_io_executor client) {
  if (p.step == 0) return;
  switch (p.kind) {
    case fault::cut: proxy.cut_after(zk_opcode::any, 0ms, p.step); break;
    case fault::reply_lost: proxy.cut_after(zk_opcode::any, 200ms, p.step); break;
    case fault::reply_late: proxy.hold_replies(zk_opcode::any, late_reply_hold, p.step); break;
    // Held until the session has moved to the twin (the server then closes
    // the held connection, and the proxy with it).
    case fault::session_expired: proxy.hold_replies(zk_opcode::any, 5s, p.step); break;
    case fault::client_pause: proxy.pause_client(zk_opcode::any, client, short_pause, p.step); break;
    case fault::client_stall: proxy.pause_client(zk_opcode::any, client, long_pause, p.step); break;
  }
}

// For the session-expired fault: once the trigger fired, expire the session
// of `victim` (whose replies are held meanwhile).
asio::awaitable<void> expire_when_fired(zk_cutting_proxy& proxy, int cuts_before, zk::client& victim,
                                        std::shared_ptr<bool> stop, std::shared_ptr<bool> done) {
  while (proxy.cuts() == cuts_before && !*stop) co_await sleep_for(5ms);
  if (proxy.cuts() > cuts_before) {
    bool expired = co_await dlock::test::expire_session(victim, dlock::test::zk_options(dlock::test::zk_hosts(),
                                                                                         session_timeout));
    BOOST_TEST(expired, "the session could not be expired");
  }
  *done = true;
}

// The nodes under `path` (the node itself and its children) owned by one of `sessions`.
asio::awaitable<std::vector<std::string>> nodes_of(zk::client& direct, std::string path,
                                                   std::vector<std::int64_t> sessions) {
  std::vector<std::string> found;
  auto ours = [&](std::int64_t owner) { return owner != 0 && std::find(sessions.begin(), sessions.end(), owner) != sessions.end(); };
  auto [ec, st] = co_await direct.exists(path, with_ec);
  if (ec || !st) co_return found;
  if (ours(st->ephemeral_owner)) found.push_back(path);
  auto [children_ec, children, parent] = co_await direct.get_children(path, with_ec);
  if (children_ec) co_return found;
  for (auto& child : children) {
    auto [child_ec, child_st] = co_await direct.exists(path + "/" + child, with_ec);
    if (!child_ec && child_st && ours(child_st->ephemeral_owner)) found.push_back(path + "/" + child);
  }
  co_return found;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

// Polls (bounded) until no node of `sessions` is left under `path`.
asio::awaitable<void> expect_no_node_of(zk::client& direct, std::string path, std::vector<std::int64_t> sessions,
                                        std::string when) {
  std::vector<std::string> left;
  for (auto waited = 0ms; waited < cleanup_patience; waited += 50ms) {
    left = co_await nodes_of(direct, path, sessions);
    if (left.empty()) co_return;
    co_await sleep_for(50ms);
  }
  BOOST_ERROR("node(s) of ours left " << when << ": " << joined(left));
}

bool is_connection_error(const error_code& ec) {
  return ec == zk::error::connection_loss || ec == zk::error::operation_timeout;
}
// expired: a grant decided when the session could have expired (the client
// paused past its timeout) is refused as such.
bool is_session_error(const error_code& ec) {
  return ec == zk::error::session_expired || ec == dlock::error::lost || ec == dlock::error::expired;
}

// The session this run started with is gone (expired: the client is lost or
// opened a fresh one). Under load a 2 s session can expire from a fault
// meant to be transient; an expiry error is then the truth.
bool session_lost(const zk::client& zk) {
  return zk.stats().sessions_opened > 1 || zk.state() == zk::session_state::lost;
}

// The error an operation may truthfully report: after a connection-level
// fault, a connection error (the session lives); after an expiry, the expiry.
void expect_truthful(const error_code& ec, const plan& p, bool session_changed, const std::string& what) {
  if (!ec) return;
  bool expiry = p.kind == fault::session_expired || p.kind == fault::client_stall;
  bool ok = session_changed || expiry ? is_session_error(ec) || is_connection_error(ec)
                                                                  : is_connection_error(ec);
  BOOST_TEST(ok, what << " reported '" << ec.message() << "' (" << ec.category().name() << ":" << ec.value()
                      << "), not a truthful error for this fault");
}

// ---------------------------------------------------------------- locks

// The semaphore runs with one lease: the contract of a lock, over its own
// steps (the `locks` mutex, the lease node, the listing of `leases`).
enum class lock_recipe { mutex, reader, writer, simple, election, semaphore };

// Where a recipe's nodes live: the lock's own node and its children, or, for
// the semaphore, its `locks` mutex and its `leases`.
std::vector<std::string> node_folders(lock_recipe kind, const std::string& path) {
  if (kind == lock_recipe::semaphore) return {path + "/locks", path + "/leases"};
  return {path};
}

// One lock recipe behind one interface.
struct lock_under_test {
  lock_recipe kind;
  std::unique_ptr<zk::mutex> exclusive;
  std::unique_ptr<zk::shared_mutex> shared;
  std::unique_ptr<zk::simple_lock> simple;
  std::unique_ptr<zk::leader_election> election;
  std::unique_ptr<zk::semaphore> leases;

  lock_under_test(lock_recipe k, zk::client& zk, const std::string& path) : kind(k) {
    switch (k) {
      case lock_recipe::mutex: exclusive = std::make_unique<zk::mutex>(zk, path); break;
      case lock_recipe::reader:
      case lock_recipe::writer: shared = std::make_unique<zk::shared_mutex>(zk, path); break;
      case lock_recipe::simple: simple = std::make_unique<zk::simple_lock>(zk, path); break;
      case lock_recipe::election: election = std::make_unique<zk::leader_election>(zk, path); break;
      case lock_recipe::semaphore: leases = std::make_unique<zk::semaphore>(zk, path, 1); break;
    }
  }
  zk::mutex* as_mutex() {
    switch (kind) {
      case lock_recipe::mutex: return exclusive.get();
      case lock_recipe::reader: return &shared->reader();
      case lock_recipe::writer: return &shared->writer();
      case lock_recipe::simple: return simple.get();
      case lock_recipe::election:
      case lock_recipe::semaphore: return nullptr;
    }
    return nullptr;
  }
  dlock::lock_loss& loss() {
    if (kind == lock_recipe::election) return election->loss();
    if (kind == lock_recipe::semaphore) return leases->loss();
    return as_mutex()->loss();
  }
  bool held() {
    if (kind == lock_recipe::election) return election->is_leader();
    if (kind == lock_recipe::semaphore) return leases->held();
    return as_mutex()->held();
  }
};

asio::awaitable<error_code> acquire(lock_under_test& l) {
  if (l.kind == lock_recipe::election) {
    auto [ec] = co_await l.election->campaign("steps-candidate", with_ec);
    co_return ec;
  }
  if (l.kind == lock_recipe::semaphore) {
    auto [ec] = co_await l.leases->acquire(with_ec);
    co_return ec;
  }
  auto [ec] = co_await l.as_mutex()->acquire(with_ec);
  co_return ec;
}

asio::awaitable<error_code> release(lock_under_test& l) {
  if (l.kind == lock_recipe::election) {
    auto [ec] = co_await l.election->resign(with_ec);
    co_return ec;
  }
  if (l.kind == lock_recipe::semaphore) {
    auto [ec] = co_await l.leases->release(with_ec);
    co_return ec;
  }
  auto [ec] = co_await l.as_mutex()->release(with_ec);
  co_return ec;
}

// "At most one holder": a contender that conflicts with ours must find the
// lock taken. If it got it, our side must learn of the loss (held() false)
// within the session timeout: a fault that hides the expiry from the client
// (its replies held) leaves a window no client can close, as long as the
// loss is told once the client can know; a holder that still says held()
// after that is a second holder.
asio::awaitable<error_code> second_try(zk::client& direct, lock_recipe kind, std::string path) {
  error_code ec;
  if (kind == lock_recipe::simple) {
    zk::simple_lock other(direct, path);
    std::tie(ec) = co_await other.try_acquire(with_ec);
    if (!ec) co_await other.release(with_ec);
  } else if (kind == lock_recipe::reader || kind == lock_recipe::writer) {
    zk::shared_mutex other(direct, path);
    std::tie(ec) = co_await other.writer().try_acquire(with_ec);
    if (!ec) co_await other.writer().release(with_ec);
  } else if (kind == lock_recipe::semaphore) {
    zk::semaphore other(direct, path, 1);
    std::tie(ec) = co_await other.try_acquire(with_ec);
    if (!ec) co_await other.release(with_ec);
  } else {
    zk::mutex other(direct, path);
    std::tie(ec) = co_await other.try_acquire(with_ec);
    if (!ec) co_await other.release(with_ec);
  }
  co_return ec;
}

asio::awaitable<void> expect_no_second_holder(zk::client& direct, lock_under_test& l, std::string path) {
  auto ec = co_await second_try(direct, l.kind, path);
  if (ec == dlock::error::taken) co_return;
  BOOST_TEST(!ec, "a second client's try_acquire: " << ec.message());
  for (auto waited = 0ms; l.held() && waited < session_timeout + 500ms; waited += 20ms) co_await sleep_for(20ms);
  BOOST_TEST(!l.held(), "a second client acquired while our lock still says held()");
  BOOST_TEST_MESSAGE("the hold was lost while the checks ran (held() is false now)");
}

// After a successful acquire: our node is there, owned by our live session, and nobody else can hold.
asio::awaitable<void> expect_held(zk::client& zk, zk::client& direct, lock_under_test& l, std::string path,
                                  plan p) {
  if (!l.held()) {
    // The fault dropped the connection just after the step that decided the
    // grant was answered: under the standard policy a hold lost at once,
    // which must have been told (a silent !held() fails here).
    BOOST_TEST(l.loss().lost(), "acquire succeeded, held() is false and no loss was told");
    BOOST_TEST_MESSAGE("lost right after the grant: " << l.loss().reason().message());
    co_return;
  }
  std::vector<std::int64_t> ours(1, zk.session_id());
  // The semaphore's hold is its lease (its `locks` node goes once the lease is
  // taken). Named first: g++ 12 destroys a conditional's temporary twice
  // inside a co_await expression.
  auto holds_at = l.kind == lock_recipe::semaphore ? path + "/leases" : path;
  auto mine = co_await nodes_of(direct, holds_at, ours);
  // A client stalled past its session timeout just after a grant (at the
  // watch that follows it) cannot be told before its session ends on the
  // servers; it must learn it as soon as it runs again.
  if (mine.size() != 1u && p.kind == fault::client_stall) {
    for (auto waited = 0ms; l.held() && waited < session_timeout + 500ms; waited += 20ms) co_await sleep_for(20ms);
    BOOST_TEST(!l.held(), "our node is gone after a stall and held() still says held");
    co_return;
  }
  BOOST_TEST(mine.size() == 1u, "acquire succeeded: nodes of our session on the server: [" << joined(mine) << "]");
  if (auto* m = l.as_mutex(); m && !mine.empty())
    BOOST_TEST(m->node_path() == mine.front(), "node_path() is " << m->node_path());
  if (l.kind == lock_recipe::election && l.held()) {
    // Asked through the direct client, so it is no step of ours.
    zk::leader_election observer(direct, path);
    auto [ec, leader] = co_await observer.leader(with_ec);
    BOOST_TEST((!ec && (leader == std::optional<std::string>("steps-candidate") || !l.held())),
               "the leader is not us: " << ec.message() << " " << leader.value_or("(none)"));
  }
  co_await expect_no_second_holder(direct, l, path);
}

asio::awaitable<void> lock_scenario(lock_recipe kind, zk_cutting_proxy& proxy, plan p, std::shared_ptr<run_result> out) {
  auto ex = co_await asio::this_coro::executor;
  zk::client direct(ex, dlock::test::zk_options(dlock::test::zk_hosts(), checker_session_timeout));
  co_await direct.connect();
  co_await ensure_base(direct);
  zk::client zk(ex, dlock::test::zk_options(proxy.address(), session_timeout));
  co_await zk.connect();
  auto path = base_path() + "/" + dlock::test::unique_name("lock");
  lock_under_test lock(kind, zk, path);
  std::vector<std::int64_t> sessions(1, zk.session_id());

  auto stop_expirer = std::make_shared<bool>(false);
  auto expirer_done = std::make_shared<bool>(true);
  auto before = proxy.forwarded_requests();
  auto cuts_before = proxy.cuts();
  arm(proxy, p, ex);
  if (p.step > 0 && p.kind == fault::session_expired) {
    *expirer_done = false;
    asio::co_spawn(ex, expire_when_fired(proxy, cuts_before, zk, stop_expirer, expirer_done), asio::detached);
  }

  auto acquired = co_await acquire(lock);
  if (zk.session_id() != sessions.front()) sessions.push_back(zk.session_id());
  expect_truthful(acquired, p, session_lost(zk), "acquire");
  if (!acquired) {
    co_await expect_held(zk, direct, lock, path, p);
    auto released = co_await release(lock);
    if (zk.session_id() != sessions.back()) sessions.push_back(zk.session_id());
    expect_truthful(released, p, session_lost(zk), "release");
    BOOST_TEST(!lock.held(), "held() after release");
    for (auto& folder : node_folders(kind, path))
      co_await expect_no_node_of(direct, folder, sessions, "after release (" + released.message() + ")");
  } else {
    BOOST_TEST(!lock.held(), "held() after a failed acquire");
    for (auto& folder : node_folders(kind, path))
      co_await expect_no_node_of(direct, folder, sessions, "after a failed acquire (" + acquired.message() + ")");
  }
  *stop_expirer = true;
  while (!*expirer_done) co_await sleep_for(10ms);
  out->steps = proxy.forwarded_requests() - before;
  out->fired = proxy.cuts() > cuts_before;
  disarm(proxy);
  co_await zk.close(with_ec);
  co_await direct.close(with_ec);
  proxy.cut_all();  // a hold still running must not reach the next run
}

// ---------------------------------------------------------------- queue

enum class queue_mode { basic, claim };

// The item nodes under `path` whose data is `item`.
asio::awaitable<std::vector<std::string>> items_with(zk::client& direct, std::string path, std::string item) {
  std::vector<std::string> found;
  auto [ec, children, st] = co_await direct.get_children(path, with_ec);
  if (ec) co_return found;
  for (auto& child : children) {
    auto [get_ec, data, child_st] = co_await direct.get(path + "/" + child, with_ec);
    if (!get_ec && data == item) found.push_back(child);
  }
  co_return found;
}

asio::awaitable<void> queue_scenario(queue_mode mode, zk_cutting_proxy& proxy, plan p,
                                     std::shared_ptr<run_result> out) {
  auto ex = co_await asio::this_coro::executor;
  zk::client direct(ex, dlock::test::zk_options(dlock::test::zk_hosts(), checker_session_timeout));
  co_await direct.connect();
  co_await ensure_base(direct);
  zk::client zk(ex, dlock::test::zk_options(proxy.address(), session_timeout));
  co_await zk.connect();
  auto path = base_path() + "/" + dlock::test::unique_name("queue");
  auto item = dlock::test::unique_name("item");
  zk::queue q(zk, path);
  std::vector<std::int64_t> sessions(1, zk.session_id());
  auto note_session = [&] {
    if (zk.session_id() != sessions.back()) sessions.push_back(zk.session_id());
  };

  auto stop_expirer = std::make_shared<bool>(false);
  auto expirer_done = std::make_shared<bool>(true);
  auto before = proxy.forwarded_requests();
  auto cuts_before = proxy.cuts();
  arm(proxy, p, ex);
  if (p.step > 0 && p.kind == fault::session_expired) {
    *expirer_done = false;
    asio::co_spawn(ex, expire_when_fired(proxy, cuts_before, zk, stop_expirer, expirer_done), asio::detached);
  }

  auto [offer_ec, name] = co_await q.offer(item, with_ec);
  note_session();
  expect_truthful(offer_ec, p, session_lost(zk), "offer");
  auto copies = co_await items_with(direct, path, item);
  if (!offer_ec) {
    BOOST_TEST(copies.size() == 1u, "offer succeeded: copies of the item in the queue: " << copies.size());
  } else {
    // The outcome of an offer whose reply was lost is unknown, but it is one item at most.
    BOOST_TEST(copies.size() <= 1u, "offer failed: copies of the item in the queue: " << copies.size());
  }

  if (!offer_ec && mode == queue_mode::basic) {
    auto [take_ec, data] = co_await q.take(with_ec);
    note_session();
    auto left = co_await items_with(direct, path, item);
    if (!take_ec) {
      BOOST_TEST(data == item);
      BOOST_TEST(left.empty(), "take succeeded but the item is still in the queue");
    } else if (take_ec == dlock::error::removal_uncertain) {
      BOOST_TEST(data == item, "removal_uncertain comes with the item's data");
    } else {
      expect_truthful(take_ec, p, session_lost(zk), "take");
      BOOST_TEST(left.size() == 1u, "take failed (" << take_ec.message() << ") and the item is gone: lost");
    }
  }
  if (!offer_ec && mode == queue_mode::claim) {
    auto [claim_ec, claimed] = co_await q.take_claimed(with_ec);
    note_session();
    if (!claim_ec) {
      BOOST_TEST(claimed.data == item);
      std::vector<std::int64_t> current(1, zk.session_id());
      auto claims = co_await nodes_of(direct, path + ".claims", current);
      if (claims.empty() && p.kind == fault::client_stall) {
        // Stalled past the session timeout just after the claim (at the
        // request that follows it): it cannot be told in time, it must
        // learn that its session ended as soon as it runs again.
        for (auto waited = 0ms; !session_lost(zk) && waited < session_timeout + 2s; waited += 20ms)
          co_await sleep_for(20ms);
        BOOST_TEST(session_lost(zk), "our claim is gone after a stall and our session still looks alive");
      } else {
        BOOST_TEST(claims.size() == 1u, "take_claimed succeeded: claims of our session: [" << joined(claims) << "]");
      }
      auto still = co_await items_with(direct, path, item);
      BOOST_TEST(still.size() == 1u, "a claimed item stays in the queue");
      auto [ack_ec] = co_await q.ack(claimed, with_ec);
      note_session();
      auto left = co_await items_with(direct, path, item);
      if (!ack_ec) {
        BOOST_TEST(left.empty(), "ack succeeded but the item is still in the queue");
      } else if (ack_ec == dlock::error::lost) {
        BOOST_TEST(left.size() == 1u, "ack said lost (the item went back) but the item is gone");
      } else if (ack_ec == dlock::error::removal_uncertain) {
        // Only the end of the session makes an ack's delete uncertain (its
        // retries go on while the session may live); the item is then gone
        // or back, once.
        BOOST_TEST((session_lost(zk) || p.kind == fault::session_expired),
                   "ack said removal_uncertain while its session lived");
        BOOST_TEST(left.size() <= 1u);
      } else {
        expect_truthful(ack_ec, p, session_lost(zk), "ack");
      }
      if (ack_ec != zk::error::connection_loss)
        co_await expect_no_node_of(direct, path + ".claims", sessions, "after ack (" + ack_ec.message() + ")");
    } else {
      expect_truthful(claim_ec, p, session_lost(zk), "take_claimed");
      auto still = co_await items_with(direct, path, item);
      BOOST_TEST(still.size() == 1u, "take_claimed failed (" << claim_ec.message() << ") and the item is gone: lost");
      co_await expect_no_node_of(direct, path + ".claims", sessions,
                                 "after a failed take_claimed (" + claim_ec.message() + ")");
    }
  }
  *stop_expirer = true;
  while (!*expirer_done) co_await sleep_for(10ms);
  out->steps = proxy.forwarded_requests() - before;
  out->fired = proxy.cuts() > cuts_before;
  disarm(proxy);
  co_await zk.close(with_ec);
  co_await direct.close(with_ec);
  proxy.cut_all();  // a hold still running must not reach the next run
}

// ---------------------------------------------------------------- driver

// Each run has its own clients and lock objects; the proxy is shared by a
// recipe's runs (a fresh one per run would cost its held replies' time when
// it stops), and every run counts from where the previous one left it.
template <class Scenario>
run_result run_once(zk_cutting_proxy& proxy, Scenario scenario, plan p) {
  auto out = std::make_shared<run_result>();
  asio::io_context io;
  dlock::test::run_coroutine(io, scenario(proxy, p, out));
  return *out;
}

// The slow faults (late reply, expiry: each waits out a timeout) run at every
// other step, alternating with the recipe's `phase`, so that across the
// recipes every step index meets every kind; the cuts run at every step.
// DLOCK_STEPS_EVERY_FAULT=1 runs every fault at every step of every recipe
// (about twice as long: for a run of record, not for CI).
dlock::test::fault_sampler sampler(int phase) {
  const char* every = std::getenv("DLOCK_STEPS_EVERY_FAULT");
  bool exhaustive = every && std::string(every) == "1";
  return [phase, exhaustive](int step, std::size_t kind) {
    auto f = static_cast<fault>(kind);
    if (exhaustive || f == fault::cut || f == fault::reply_lost) return true;
    return (step + phase + static_cast<int>(kind)) % 2 == 0;
  };
}

template <class Scenario>
void every_step(const std::string& recipe, Scenario scenario, int phase) {
  zk_cutting_proxy proxy(dlock::test::zk_hosts());
  dlock::test::for_each_step(
      recipe, fault_names, [&] { return run_once(proxy, scenario, plan{}).steps; },
      [&](int k, std::size_t kind) {
        auto r = run_once(proxy, scenario, plan{k, static_cast<fault>(kind)});
        return r.fired ? step_outcome::fired : step_outcome::not_reached;
      },
      sampler(phase));
}

auto lock_scenario_of(lock_recipe kind) {
  return [kind](zk_cutting_proxy& proxy, plan p, std::shared_ptr<run_result> out) {
    return lock_scenario(kind, proxy, p, std::move(out));
  };
}
auto queue_scenario_of(queue_mode mode) {
  return [mode](zk_cutting_proxy& proxy, plan p, std::shared_ptr<run_result> out) {
    return queue_scenario(mode, proxy, p, std::move(out));
  };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(steps_zk)

BOOST_AUTO_TEST_CASE(mutex_every_step) { every_step("mutex", lock_scenario_of(lock_recipe::mutex), 0); }
BOOST_AUTO_TEST_CASE(read_lock_every_step) { every_step("read lock", lock_scenario_of(lock_recipe::reader), 1); }
BOOST_AUTO_TEST_CASE(write_lock_every_step) { every_step("write lock", lock_scenario_of(lock_recipe::writer), 0); }
BOOST_AUTO_TEST_CASE(simple_lock_every_step) { every_step("simple lock", lock_scenario_of(lock_recipe::simple), 0); }
BOOST_AUTO_TEST_CASE(election_every_step) { every_step("election", lock_scenario_of(lock_recipe::election), 1); }
BOOST_AUTO_TEST_CASE(semaphore_every_step) { every_step("semaphore", lock_scenario_of(lock_recipe::semaphore), 1); }
BOOST_AUTO_TEST_CASE(queue_basic_every_step) { every_step("queue (basic)", queue_scenario_of(queue_mode::basic), 1); }
BOOST_AUTO_TEST_CASE(queue_claim_every_step) { every_step("queue (claim/ack)", queue_scenario_of(queue_mode::claim), 0); }

BOOST_AUTO_TEST_SUITE_END()
