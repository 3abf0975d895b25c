// Leader election with failover: three candidates, each with its own
// ZooKeeper session as separate processes would have, campaign on one
// election path. The first leader resigns; the second "crashes" (closes its
// session, as a dying process's session ends); the third takes over. An
// observer with a fourth session follows the leader with `observe()`.
//
// Exits 0 when every candidate led exactly once, never two at a time, with
// strictly increasing fencing tokens (each term's token is larger than the
// last, so storage can reject a deposed leader's late writes).
#include "example_support.hpp"

#include <dlock/zk/client.hpp>
#include <dlock/zk/leader_election.hpp>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace zk = dlock::zk;
using namespace std::chrono_literals;

struct election_log {
  std::string path = example::unique("/dlock-examples/election");
  int leading = 0;  // candidates that believe they lead right now
  int terms = 0;
  std::int64_t last_token = 0;
};

enum class exit_plan { resign, crash };

asio::awaitable<void> candidate(election_log* log, std::string id, exit_plan plan) {
  zk::client session(co_await asio::this_coro::executor, example::zk_options());
  co_await session.connect();
  zk::leader_election election(session, log->path);
  co_await election.campaign(id);  // returns once this candidate leads

  example::check(++log->leading == 1, "one leader at a time");
  example::check(election.fencing_token() > log->last_token, "terms' fencing tokens increase");
  log->last_token = election.fencing_token();
  ++log->terms;
  std::printf("%s leads (term token %lld)\n", id.c_str(), static_cast<long long>(log->last_token));
  co_await example::sleep_for(300ms);  // leading: doing the leader's work
  --log->leading;

  if (plan == exit_plan::resign) {
    std::printf("%s resigns\n", id.c_str());
    co_await election.resign();  // the next candidate leads at once
  } else {
    std::printf("%s crashes (its session ends)\n", id.c_str());
  }
  co_await session.close();  // a crash ends the session too: its candidate node goes with it
}

// Prints each new leader until the election has none left.
asio::awaitable<void> observer(election_log* log) {
  zk::client session(co_await asio::this_coro::executor, example::zk_options());
  co_await session.connect();
  zk::leader_election election(session, log->path);
  auto leader = co_await election.observe(std::nullopt);  // waits for the first leader
  while (leader) {
    std::printf("observer: the leader is now %s\n", leader->c_str());
    leader = co_await election.observe(leader);
  }
  std::printf("observer: no leader left\n");
  co_await session.close();
}

// Starts the candidates one after the other, so they queue in this order.
asio::awaitable<void> staggered(election_log* log, std::string id, exit_plan plan, std::chrono::milliseconds delay) {
  co_await example::sleep_for(delay);
  co_await candidate(log, std::move(id), plan);
}

asio::awaitable<void> example_main() {
  election_log log;
  std::vector<asio::awaitable<void>> everyone;
  everyone.push_back(observer(&log));
  everyone.push_back(staggered(&log, "alpha", exit_plan::resign, 0ms));
  everyone.push_back(staggered(&log, "bravo", exit_plan::crash, 100ms));
  everyone.push_back(staggered(&log, "charlie", exit_plan::resign, 200ms));
  co_await example::all_of(std::move(everyone));
  example::check(log.terms == 3, "each candidate led once");
  std::printf("3 terms, one leader at a time, tokens increasing\n");
}

int main() { return example::run("zk_leader_failover", example_main); }
