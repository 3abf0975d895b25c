// ZooKeeper locks across network partitions (not crashes): run by
// scripts/partition-env in a network namespace of its own, with its own
// ensemble, where iptables cuts traffic silently (DROP).
//
// The invariant checked: at the moment a contender's acquire completes, the
// previous holder no longer believes it holds (`held()` is false, its loss
// was told). Both run on one io_context, so "at that moment" is exact.
#include "common/partition.hpp"
#include "common/servers.hpp"
#include "integration/zk_client_support.hpp"

#include <dlock/error.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/error.hpp>
#include <dlock/zk/mutex.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

using namespace dlock;
using namespace std::chrono_literals;
using dlock::test::run_coroutine;
using dlock::test::sleep_for;
namespace partition = dlock::test::partition;
using clock_type = std::chrono::steady_clock;
constexpr auto tuple = asio::as_tuple(asio::deferred);

namespace {

// --- the ensemble inside the namespace (ports as scripts/servers lays them out) ---

int port_base() {
  const char* base = std::getenv("DLOCK_PORT_BASE");
  return base ? std::atoi(base) : 21000;
}
std::uint16_t client_port(int member) { return static_cast<std::uint16_t>(port_base() + 10 + member); }
std::uint16_t quorum_port(int member) { return static_cast<std::uint16_t>(port_base() + 20 + member); }
std::uint16_t election_port(int member) { return static_cast<std::uint16_t>(port_base() + 30 + member); }
std::string address(int member) { return "127.0.0.1:" + std::to_string(client_port(member)); }

/// The uid ensemble member `member` runs as (scripts/partition-env sets the base).
unsigned member_uid(int member) {
  const char* base = std::getenv("DLOCK_ZK_UID_BASE");
  BOOST_REQUIRE_MESSAGE(base && *base, "DLOCK_ZK_UID_BASE is not set: run through scripts/partition-env");
  return static_cast<unsigned>(std::atoi(base) + member);
}

/// "leader", "follower", or "" when the member does not serve (electing, cut).
std::string mode_of(int member) {
  auto out = partition::output_of("printf srvr | timeout 3 nc -w 2 127.0.0.1 " +
                                  std::to_string(client_port(member)) + " 2>/dev/null");
  auto at = out.find("Mode: ");
  if (at == std::string::npos) return "";
  auto end = out.find('\n', at);
  return out.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
}

/// Waits until exactly one of `members` says it leads; 0 if none did in time.
asio::awaitable<int> leader_among(std::vector<int> members) {
  auto deadline = clock_type::now() + dlock::test::patience;
  while (clock_type::now() < deadline) {
    std::vector<int> leaders;
    for (int m : members)
      if (mode_of(m) == "leader") leaders.push_back(m);
    if (leaders.size() == 1) co_return leaders.front();
    co_await sleep_for(200ms);
  }
  co_return 0;
}

asio::awaitable<bool> member_in_mode(int member, std::string mode) {
  auto deadline = clock_type::now() + dlock::test::patience;
  while (clock_type::now() < deadline) {
    if (mode_of(member) == mode) co_return true;
    co_await sleep_for(200ms);
  }
  co_return false;
}

// --- what the holder and the contender saw, and when ---

struct loss_seen {
  bool done = false;
  error_code reason;
  clock_type::time_point at;
};

struct grant_seen {
  bool done = false;
  error_code ec;
  bool holder_believed_it_held = false;  // at the moment of the grant
  clock_type::time_point at;
};

asio::awaitable<void> watch_loss(zk::mutex& holder, std::shared_ptr<loss_seen> seen) {
  auto [reason] = co_await holder.loss().wait(tuple);
  seen->reason = reason;
  seen->at = clock_type::now();
  seen->done = true;
}

asio::awaitable<void> contend(zk::mutex& contender, zk::mutex& holder, std::shared_ptr<grant_seen> seen) {
  auto [ec] = co_await contender.acquire(tuple);
  seen->holder_believed_it_held = holder.held();  // same thread: nothing ran in between
  seen->ec = ec;
  seen->at = clock_type::now();
  seen->done = true;
}

/// Waits (bounded by `patience`) until both the grant and the loss were seen.
asio::awaitable<void> until_both(std::shared_ptr<grant_seen> grant, std::shared_ptr<loss_seen> loss) {
  auto deadline = clock_type::now() + dlock::test::patience;
  while (!(grant->done && loss->done) && clock_type::now() < deadline) co_await sleep_for(10ms);
  BOOST_REQUIRE_MESSAGE(grant->done, "the contender never acquired");
  BOOST_REQUIRE_MESSAGE(loss->done, "the holder was never told of a loss");
}

/// Waits until the contender has its node queued behind the holder's.
asio::awaitable<void> until_queued(zk::mutex& holder) {
  for (int i = 0; i < 500; ++i) {
    auto [ec, ids] = co_await holder.participants(tuple);
    if (!ec && ids.size() == 2) co_return;
    co_await sleep_for(10ms);
  }
  BOOST_FAIL("the contender never queued");
}

long ms_between(clock_type::time_point from, clock_type::time_point to) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count());
}

std::string lock_path(const std::string& name) { return "/dlock-test/partition/" + dlock::test::unique_name(name); }

/// The holder's client comes back (after the heal) and both let go.
asio::awaitable<void> release_both(zk::client& holder_zk, zk::mutex& holder, zk::mutex& contender,
                                   error_code loss_reason) {
  // Named: g++ 12 rejects a braced list as an argument inside a coroutine.
  std::vector<zk::session_state> back{zk::session_state::connected, zk::session_state::reconnected};
  auto state = co_await dlock::test::wait_for_any_state(holder_zk, back);
  BOOST_TEST_MESSAGE("the holder's client after the heal: " << zk::to_string(state));
  auto [release_ec] = co_await holder.release(tuple);
  BOOST_TEST(release_ec == loss_reason, "release after the loss reports it: " << release_ec.message());
  BOOST_TEST(contender.held());
  co_await contender.release();
}

// --- (1) the holder's client cut from the member it is connected to ---

asio::awaitable<void> client_cut_from_its_member(zk::loss_policy policy) {
  auto ex = co_await asio::this_coro::executor;
  // The holder knows only member 1, so the cut keeps it away until its session expires.
  zk::client holder_zk(ex, dlock::test::zk_options(address(1), 3s));
  zk::client contender_zk(ex, dlock::test::zk_options(address(2) + "," + address(3), 4s));
  co_await holder_zk.connect();
  co_await contender_zk.connect();
  auto path = lock_path("client-cut");
  zk::lock_options options;
  options.policy = policy;
  zk::mutex holder(holder_zk, path, options);
  zk::mutex contender(contender_zk, path);
  co_await holder.acquire();
  const auto holder_token = holder.fencing_token();
  auto loss = std::make_shared<loss_seen>();
  auto grant = std::make_shared<grant_seen>();
  asio::co_spawn(ex, watch_loss(holder, loss), asio::detached);
  asio::co_spawn(ex, contend(contender, holder, grant), asio::detached);
  co_await until_queued(holder);

  partition::healer healer;
  auto cut_at = clock_type::now();
  partition::isolate_port(client_port(1));
  co_await until_both(grant, loss);

  auto timeout = holder_zk.negotiated_session_timeout().count();
  BOOST_TEST_MESSAGE("policy " << (policy == zk::loss_policy::standard ? "standard" : "session")
                               << ", session timeout " << timeout << " ms, after the cut: holder told of the loss ("
                               << loss->reason.message() << ") at " << ms_between(cut_at, loss->at)
                               << " ms, contender granted at " << ms_between(cut_at, grant->at) << " ms");
  BOOST_TEST(!grant->ec, grant->ec.message());
  BOOST_TEST(contender.held());
  BOOST_TEST(contender.fencing_token() > holder_token, "fencing tokens grow across holders");
  BOOST_TEST(!holder.held());
  if (policy == zk::loss_policy::standard) {
    BOOST_TEST(loss->reason == make_error_code(zk::error::connection_loss), loss->reason.message());
    BOOST_TEST(!grant->holder_believed_it_held,
               "the holder still believed it held when the contender was granted the lock");
  } else {
    BOOST_TEST(loss->reason == make_error_code(zk::error::session_expired), loss->reason.message());
    // safety-review F7: `session` used to tell the loss up to about 2/3 of
    // the session timeout after the servers expired the session.
    BOOST_TEST(!grant->holder_believed_it_held,
               "F7: with loss_policy::session the holder still believed it held when the contender was "
               "granted the lock; it was told "
                   << ms_between(grant->at, loss->at) << " ms later");
  }
  partition::heal_all();
  co_await release_both(holder_zk, holder, contender, loss->reason);
  co_await holder_zk.close();
  co_await contender_zk.close();
}

// --- (1b) the same cut, but the holder knows the other members too ---

asio::awaitable<void> until_done(std::shared_ptr<loss_seen> loss) {
  auto deadline = clock_type::now() + dlock::test::patience;
  while (!loss->done && clock_type::now() < deadline) co_await sleep_for(10ms);
  BOOST_REQUIRE_MESSAGE(loss->done, "the holder was never told of a loss");
}

/// The holder moves to another member within the session timeout: the
/// session lives on, and so does its node. The standard policy has told the
/// loss all the same; the contender must still wait until the holder releases
/// (release after a loss deletes the node while the session lives).
asio::awaitable<void> client_cut_moves_to_another_member() {
  auto ex = co_await asio::this_coro::executor;
  // A session long enough to outlast the detection (2/3 of it) and the move.
  zk::client holder_zk(ex, dlock::test::zk_options(address(1) + "," + address(2) + "," + address(3), 6s));
  co_await holder_zk.connect();
  // The holder is on whichever member its client picked: that one is cut,
  // and the contender talks to the other two.
  const auto server = holder_zk.current_server();
  const int holder_member = std::stoi(server.substr(server.rfind(':') + 1)) - port_base() - 10;
  std::string others;
  for (int m = 1; m <= 3; ++m)
    if (m != holder_member) others += (others.empty() ? "" : ",") + address(m);
  zk::client contender_zk(ex, dlock::test::zk_options(others, 4s));
  co_await contender_zk.connect();
  auto path = lock_path("client-cut-moves");
  zk::mutex holder(holder_zk, path);  // standard policy
  zk::mutex contender(contender_zk, path);
  co_await holder.acquire();
  const auto session = holder_zk.session_id();
  auto loss = std::make_shared<loss_seen>();
  auto grant = std::make_shared<grant_seen>();
  asio::co_spawn(ex, watch_loss(holder, loss), asio::detached);
  asio::co_spawn(ex, contend(contender, holder, grant), asio::detached);
  co_await until_queued(holder);

  partition::healer healer;
  partition::isolate_port(client_port(holder_member));
  co_await until_done(loss);
  BOOST_TEST(loss->reason == make_error_code(zk::error::connection_loss), loss->reason.message());
  BOOST_TEST(!holder.held());
  auto state = co_await dlock::test::wait_for_state(holder_zk, zk::session_state::reconnected);
  BOOST_REQUIRE(state == zk::session_state::reconnected);
  BOOST_TEST(holder_zk.session_id() == session, "the session survived the move");
  BOOST_TEST_MESSAGE("the holder moved from zk" << holder_member << " to " << holder_zk.current_server());
  // The holder's node still exists: the contender has not been granted.
  auto [ec, ids] = co_await holder.participants(tuple);
  BOOST_TEST(!ec, ec.message());
  BOOST_TEST(ids.size() == 2u, "both nodes still queued");
  BOOST_TEST(!grant->done, "the contender was granted while the holder's node existed");

  auto [release_ec] = co_await holder.release(tuple);
  BOOST_TEST(release_ec == loss->reason, "release after the loss reports it: " << release_ec.message());
  auto deadline = clock_type::now() + dlock::test::patience;
  while (!grant->done && clock_type::now() < deadline) co_await sleep_for(10ms);
  BOOST_REQUIRE_MESSAGE(grant->done, "the contender never acquired after the release");
  BOOST_TEST(!grant->ec, grant->ec.message());
  BOOST_TEST(contender.held());
  co_await contender.release();
  partition::heal_all();
  co_await holder_zk.close();
  co_await contender_zk.close();
}

// --- (2) the ensemble's leader cut from its followers ---

/// Cuts `member` from the other two on the quorum and election ports, both
/// ways: their connections to its ports, and the connections it opened to
/// theirs (all members share 127.0.0.1: those are told apart by owner uid).
/// Its client port stays open.
void cut_from_peers(int member, const std::vector<int>& peers) {
  partition::isolate_port(quorum_port(member));
  partition::isolate_port(election_port(member));
  std::vector<std::uint16_t> peer_ports;
  for (int p : peers) {
    peer_ports.push_back(quorum_port(p));
    peer_ports.push_back(election_port(p));
  }
  partition::drop_sent_by(member_uid(member), peer_ports);
}

asio::awaitable<void> leader_cut_from_followers() {
  auto ex = co_await asio::this_coro::executor;
  std::vector<int> members{1, 2, 3};
  int leader = co_await leader_among(members);
  BOOST_REQUIRE_MESSAGE(leader != 0, "no single leader in the ensemble");
  std::vector<int> followers;
  for (int m = 1; m <= 3; ++m)
    if (m != leader) followers.push_back(m);
  // The holder knows only the leader; the contender only the followers, with
  // a session long enough to outlive the election.
  zk::client holder_zk(ex, dlock::test::zk_options(address(leader), 2s));
  zk::client contender_zk(ex, dlock::test::zk_options(address(followers[0]) + "," + address(followers[1]), 10s));
  co_await holder_zk.connect();
  co_await contender_zk.connect();
  auto path = lock_path("leader-cut");
  zk::mutex holder(holder_zk, path);  // standard policy
  zk::mutex contender(contender_zk, path);
  co_await holder.acquire();
  const auto holder_token = holder.fencing_token();
  auto loss = std::make_shared<loss_seen>();
  auto grant = std::make_shared<grant_seen>();
  asio::co_spawn(ex, watch_loss(holder, loss), asio::detached);
  asio::co_spawn(ex, contend(contender, holder, grant), asio::detached);
  co_await until_queued(holder);

  partition::healer healer;
  auto cut_at = clock_type::now();
  cut_from_peers(leader, followers);
  int new_leader = co_await leader_among(followers);
  BOOST_REQUIRE_MESSAGE(new_leader != 0, "the followers elected no leader");
  BOOST_TEST_MESSAGE("leader zk" << leader << " cut from its followers; zk" << new_leader << " leads after "
                                 << ms_between(cut_at, clock_type::now()) << " ms");
  co_await until_both(grant, loss);
  BOOST_TEST_MESSAGE("after the cut: holder told of the loss (" << loss->reason.message() << ") at "
                                                                << ms_between(cut_at, loss->at)
                                                                << " ms, contender granted at "
                                                                << ms_between(cut_at, grant->at) << " ms");
  BOOST_TEST(!grant->ec, grant->ec.message());
  BOOST_TEST(contender.held());
  BOOST_TEST(contender.fencing_token() > holder_token, "fencing tokens grow across holders");
  BOOST_TEST(!holder.held());
  BOOST_TEST(!grant->holder_believed_it_held,
             "the holder still believed it held when the contender was granted the lock");
  BOOST_TEST(co_await member_in_mode(leader, ""), "the cut leader stops serving (it lost its quorum)");

  partition::heal_all();
  BOOST_TEST(co_await member_in_mode(leader, "follower"), "the old leader rejoins as a follower");
  co_await release_both(holder_zk, holder, contender, loss->reason);
  co_await holder_zk.close();
  co_await contender_zk.close();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_partition)

BOOST_AUTO_TEST_CASE(client_cut_from_its_member_standard_policy_loses_before_a_contender_acquires) {
  asio::io_context io;
  run_coroutine(io, client_cut_from_its_member(zk::loss_policy::standard));
}

BOOST_AUTO_TEST_CASE(client_cut_from_its_member_session_policy) {
  asio::io_context io;
  run_coroutine(io, client_cut_from_its_member(zk::loss_policy::session));
}

BOOST_AUTO_TEST_CASE(client_cut_from_its_member_moves_on_and_its_node_blocks_the_contender_until_released) {
  asio::io_context io;
  run_coroutine(io, client_cut_moves_to_another_member());
}

BOOST_AUTO_TEST_CASE(leader_cut_from_its_followers_loses_the_lock_through_it) {
  asio::io_context io;
  run_coroutine(io, leader_cut_from_followers());
}

BOOST_AUTO_TEST_SUITE_END()
