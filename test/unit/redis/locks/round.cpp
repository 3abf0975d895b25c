// The Redlock round, without any server.
#include <dlock/error.hpp>
#include <dlock/limits.hpp>
#include "redis/locks/algorithm/options.hpp"
#include "redis/locks/algorithm/round.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

using namespace std::chrono_literals;
using dlock::redis::redlock_options;
using dlock::redis::detail::master_outcome;
using dlock::redis::detail::redlock_clock;
using dlock::redis::detail::redlock_invalid_reason;
using dlock::redis::detail::redlock_round;
using dlock::redis::detail::round_state;

namespace {

const redlock_clock::time_point t0{std::chrono::seconds(1000)};

redlock_round make_round(std::size_t masters, std::chrono::milliseconds ttl = 10'000ms) {
  return redlock_round(masters, ttl, dlock::redis::detail::drift_rule{0.01, 2ms}, t0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redlock_round_tests)

BOOST_AUTO_TEST_CASE(drift_and_validity_follow_the_formula) {
  auto round = make_round(5, 10'000ms);
  BOOST_TEST(round.drift().count() == 102);  // 10 s * 0.01 + 2 ms
  BOOST_TEST(round.quorum() == 3u);
  BOOST_TEST(round.validity(t0 + 30ms).count() == 10'000 - 30 - 102);
  // Elapsed time is rounded up, so validity is never overstated.
  BOOST_TEST(round.validity(t0 + 30ms + 1us).count() == 10'000 - 31 - 102);
  BOOST_TEST(redlock_round(1, 1000ms, {0.0, 2ms}, t0).drift().count() == 2);
}

BOOST_AUTO_TEST_CASE(majority_decides_without_waiting_for_the_rest) {
  auto round = make_round(5);
  BOOST_TEST((round.record(0, master_outcome::ok, t0 + 1ms) == round_state::pending));
  BOOST_TEST((round.record(3, master_outcome::ok, t0 + 2ms) == round_state::pending));
  BOOST_TEST((round.record(4, master_outcome::ok, t0 + 3ms) == round_state::acquired));
  BOOST_TEST(round.count(master_outcome::pending) == 2u);
  BOOST_TEST(round.validity_at_decision().count() == 10'000 - 3 - 102);
  BOOST_TEST(!round.failure());
  BOOST_TEST(!round.release_all());
  // Late answers change nothing, and a late yes of a won round needs no extra release.
  BOOST_TEST((round.record(1, master_outcome::ok, t0 + 40ms) == round_state::acquired));
  BOOST_TEST(!round.needs_late_release(1));
  BOOST_TEST((round.time_out_pending(t0 + 50ms) == round_state::acquired));
  BOOST_TEST((round.outcome(2) == master_outcome::timed_out));
  BOOST_TEST(round.describe() == "ok ok timed_out ok ok");
}

BOOST_AUTO_TEST_CASE(already_ours_counts_as_ours) {
  auto round = make_round(3);
  round.record(0, master_outcome::already_ours, t0 + 1ms);
  BOOST_TEST((round.record(1, master_outcome::ok, t0 + 1ms) == round_state::acquired));
  BOOST_TEST(round.ours() == 2u);
}

BOOST_AUTO_TEST_CASE(majority_taken_fails_early_with_taken) {
  auto round = make_round(5);
  round.record(0, master_outcome::taken, t0 + 1ms);
  round.record(1, master_outcome::ok, t0 + 1ms);
  BOOST_TEST((round.record(2, master_outcome::taken, t0 + 1ms) == round_state::pending));
  // Two ours + two pending could still make three: not decided until the third no.
  BOOST_TEST((round.record(3, master_outcome::taken, t0 + 2ms) == round_state::failed));
  BOOST_TEST((round.failure() == dlock::error::taken));
  BOOST_TEST(round.release_all());
  BOOST_TEST(round.count(master_outcome::pending) == 1u);
}

BOOST_AUTO_TEST_CASE(too_many_failures_is_no_quorum) {
  auto round = make_round(5);
  round.record(0, master_outcome::failed, t0 + 1ms);
  round.record(1, master_outcome::ok, t0 + 1ms);
  round.record(2, master_outcome::taken, t0 + 1ms);
  BOOST_TEST((round.record(3, master_outcome::failed, t0 + 1ms) == round_state::failed));
  BOOST_TEST((round.failure() == dlock::error::no_quorum));
  BOOST_TEST(round.release_all());
}

BOOST_AUTO_TEST_CASE(timeouts_decide_no_quorum_and_late_yes_is_released) {
  auto round = make_round(5);
  round.record(0, master_outcome::ok, t0 + 1ms);
  round.record(1, master_outcome::ok, t0 + 1ms);
  BOOST_TEST((round.time_out_pending(t0 + 50ms) == round_state::failed));
  BOOST_TEST((round.failure() == dlock::error::no_quorum));
  BOOST_TEST(round.describe() == "ok ok timed_out timed_out timed_out");
  // The SET on master 3 landed after all: the round stays failed, and that key must go.
  BOOST_TEST((round.record(3, master_outcome::ok, t0 + 80ms) == round_state::failed));
  BOOST_TEST(round.needs_late_release(3));
  // A late no on a timed-out master changes nothing.
  round.record(4, master_outcome::taken, t0 + 81ms);
  BOOST_TEST((round.outcome(4) == master_outcome::timed_out));
  BOOST_TEST(!round.needs_late_release(4));
  // Answers before the decision are not late.
  BOOST_TEST(!round.needs_late_release(0));
}

BOOST_AUTO_TEST_CASE(late_yes_after_a_taken_decision_is_released) {
  auto round = make_round(3);
  round.record(0, master_outcome::taken, t0 + 1ms);
  BOOST_TEST((round.record(1, master_outcome::taken, t0 + 1ms) == round_state::failed));
  round.record(2, master_outcome::already_ours, t0 + 2ms);
  BOOST_TEST(round.needs_late_release(2));
  BOOST_TEST(!round.needs_late_release(7));  // out of range is harmless
}

BOOST_AUTO_TEST_CASE(majority_after_validity_ran_out_is_expired) {
  auto round = make_round(3, 100ms);  // drift 3 ms
  round.record(0, master_outcome::ok, t0 + 10ms);
  BOOST_TEST((round.record(1, master_outcome::ok, t0 + 97ms) == round_state::failed));
  BOOST_TEST((round.failure() == dlock::error::expired));
  BOOST_TEST(round.release_all());
}

BOOST_AUTO_TEST_CASE(validity_running_out_while_waiting_is_expired) {
  auto round = make_round(3, 100ms);
  BOOST_TEST((round.record(0, master_outcome::ok, t0 + 98ms) == round_state::failed));
  BOOST_TEST((round.failure() == dlock::error::expired));
}

BOOST_AUTO_TEST_CASE(one_master_behaves_like_a_single_lock) {
  auto won = make_round(1);
  BOOST_TEST(won.quorum() == 1u);
  BOOST_TEST((won.record(0, master_outcome::ok, t0 + 1ms) == round_state::acquired));
  auto lost = make_round(1);
  BOOST_TEST((lost.record(0, master_outcome::taken, t0 + 1ms) == round_state::failed));
  BOOST_TEST((lost.failure() == dlock::error::taken));
  auto broken = make_round(1);
  BOOST_TEST((broken.record(0, master_outcome::failed, t0 + 1ms) == round_state::failed));
  BOOST_TEST((broken.failure() == dlock::error::no_quorum));
}

BOOST_AUTO_TEST_CASE(even_masters_need_more_than_half) {
  auto round = make_round(4);
  BOOST_TEST(round.quorum() == 3u);
  round.record(0, master_outcome::ok, t0 + 1ms);
  BOOST_TEST((round.record(1, master_outcome::ok, t0 + 1ms) == round_state::pending));
  BOOST_TEST((round.record(2, master_outcome::taken, t0 + 1ms) == round_state::pending));
  BOOST_TEST((round.record(3, master_outcome::taken, t0 + 1ms) == round_state::failed));
  BOOST_TEST((round.failure() == dlock::error::taken));  // two held by others vs none broken
  auto two = make_round(2);
  two.record(0, master_outcome::ok, t0 + 1ms);
  BOOST_TEST((two.record(1, master_outcome::timed_out, t0 + 1ms) == round_state::failed));
  BOOST_TEST((two.failure() == dlock::error::no_quorum));
}

BOOST_AUTO_TEST_CASE(a_master_answers_once) {
  auto round = make_round(3);
  round.record(0, master_outcome::taken, t0 + 1ms);
  round.record(0, master_outcome::ok, t0 + 2ms);  // ignored: not pending, not timed out
  BOOST_TEST((round.outcome(0) == master_outcome::taken));
  round.record(1, master_outcome::pending, t0 + 2ms);  // not an answer
  BOOST_TEST((round.outcome(1) == master_outcome::pending));
  round.record(9, master_outcome::ok, t0 + 2ms);  // out of range
  BOOST_TEST(round.ours() == 0u);
}

BOOST_AUTO_TEST_CASE(options_are_validated) {
  redlock_options good;
  BOOST_TEST(redlock_invalid_reason(good, 5, "k").empty());
  BOOST_TEST(!redlock_invalid_reason(good, 0, "k").empty());
  BOOST_TEST(!redlock_invalid_reason(good, 5, "").empty());
  auto bad = good;
  bad.ttl = 0ms;
  BOOST_TEST(!redlock_invalid_reason(bad, 5, "k").empty());
  bad = good;
  bad.ttl = -5ms;
  BOOST_TEST(!redlock_invalid_reason(bad, 5, "k").empty());
  bad = good;
  bad.drift_factor = 1.0;
  BOOST_TEST(!redlock_invalid_reason(bad, 5, "k").empty());
  bad.drift_factor = -0.1;
  BOOST_TEST(!redlock_invalid_reason(bad, 5, "k").empty());
  bad.drift_factor = std::nan("");
  BOOST_TEST(!redlock_invalid_reason(bad, 5, "k").empty());
  bad = good;
  bad.master_timeout = good.ttl;
  BOOST_TEST(!redlock_invalid_reason(bad, 5, "k").empty());
  bad = good;
  bad.master_timeout = 0ms;
  BOOST_TEST(!redlock_invalid_reason(bad, 5, "k").empty());
  bad = good;
  bad.retry_count = -1;
  BOOST_TEST(!redlock_invalid_reason(bad, 5, "k").empty());
  bad.wait_limit = 1000ms;
  BOOST_TEST(redlock_invalid_reason(bad, 5, "k").empty());
  bad = good;
  bad.retry_jitter = -1ms;
  BOOST_TEST(!redlock_invalid_reason(bad, 5, "k").empty());
  bad = good;
  bad.auto_extend = true;
  bad.extend_fraction = 1.0;
  BOOST_TEST(!redlock_invalid_reason(bad, 5, "k").empty());
  BOOST_TEST(redlock_invalid_reason(good, 4, "k").empty());  // even N is allowed
}

// Fencing (src/redis/locks/algorithm/round.hpp): every master reports its counter; a round is
// won once the counters seen cover a majority, with the largest as token.

namespace {
redlock_round fenced_round(std::size_t masters) {
  return redlock_round(masters, 10'000ms, dlock::redis::detail::drift_rule{0.01, 2ms}, t0, true);
}
constexpr std::int64_t none = redlock_round::no_counter;
}  // namespace

BOOST_AUTO_TEST_CASE(fencing_token_is_the_largest_counter_of_a_majority) {
  auto round = fenced_round(5);
  round.record(0, master_outcome::ok, t0 + 1ms, 8);
  round.record(1, master_outcome::ok, t0 + 1ms, 11);
  BOOST_TEST((round.record(2, master_outcome::ok, t0 + 2ms, 11) == round_state::acquired));
  BOOST_TEST(round.fencing_token() == 11);
  BOOST_TEST(round.at_token() == 2u);  // a write-back must raise one more
  BOOST_TEST(round.behind(0));
  BOOST_TEST(!round.behind(1));
  BOOST_TEST(!round.behind(3));  // never answered: left alone
}

BOOST_AUTO_TEST_CASE(fencing_counts_a_no_as_its_counter_plus_one) {
  auto round = fenced_round(5);
  round.record(0, master_outcome::taken, t0 + 1ms, 20);  // not incremented there
  round.record(1, master_outcome::ok, t0 + 1ms, 15);
  round.record(2, master_outcome::ok, t0 + 1ms, 15);
  BOOST_TEST((round.record(3, master_outcome::ok, t0 + 2ms, 15) == round_state::acquired));
  BOOST_TEST(round.fencing_token() == 21);
  BOOST_TEST(round.at_token() == 0u);
  BOOST_TEST(round.behind(0));  // a master that said no is raised too
}

// A master back from a restart without its data has no counter: a majority
// of yes without a majority of counters waits for more answers.
BOOST_AUTO_TEST_CASE(fencing_waits_for_a_majority_of_counters_past_a_master_without_one) {
  auto round = fenced_round(5);
  round.record(0, master_outcome::ok, t0 + 1ms, none);
  round.record(1, master_outcome::ok, t0 + 1ms, 4);
  BOOST_TEST((round.record(2, master_outcome::ok, t0 + 1ms, 4) == round_state::pending));
  BOOST_TEST((round.record(3, master_outcome::ok, t0 + 2ms, 12) == round_state::acquired));
  BOOST_TEST(round.fencing_token() == 12);
  BOOST_TEST(round.behind(0));  // re-seeded by the write-back
  BOOST_TEST(round.at_token() == 1u);
}

// The same when the masters with the counters are down: never a token from
// a minority of counters (it could be lower than an earlier one).
BOOST_AUTO_TEST_CASE(fencing_fails_without_a_majority_of_counters) {
  auto round = fenced_round(5);
  round.record(0, master_outcome::failed, t0 + 1ms);
  round.record(1, master_outcome::failed, t0 + 1ms);
  round.record(2, master_outcome::ok, t0 + 1ms, none);
  round.record(3, master_outcome::ok, t0 + 1ms, 3);
  BOOST_TEST((round.record(4, master_outcome::ok, t0 + 2ms, 3) == round_state::failed));
  BOOST_TEST((round.failure() == dlock::error::no_quorum));
  BOOST_TEST(round.release_all());
}

BOOST_AUTO_TEST_CASE(fencing_waits_for_counters_until_the_per_master_timeout) {
  auto round = fenced_round(5);
  round.record(0, master_outcome::ok, t0 + 1ms, none);
  round.record(1, master_outcome::ok, t0 + 1ms, 2);
  BOOST_TEST((round.record(2, master_outcome::ok, t0 + 1ms, 2) == round_state::pending));
  BOOST_TEST((round.time_out_pending(t0 + 50ms) == round_state::failed));
  BOOST_TEST((round.failure() == dlock::error::no_quorum));
}

// A new key: no counter anywhere. The round waits until every master
// answered, then starts at 1.
BOOST_AUTO_TEST_CASE(fencing_starts_a_new_key_at_one_once_every_master_answered_without_a_counter) {
  auto round = fenced_round(5);
  for (std::size_t i = 0; i < 3; ++i) round.record(i, master_outcome::ok, t0 + 1ms, none);
  BOOST_TEST((round.record(3, master_outcome::taken, t0 + 1ms, none) == round_state::pending));
  BOOST_TEST((round.record(4, master_outcome::ok, t0 + 2ms, none) == round_state::acquired));
  BOOST_TEST(round.fencing_token() == 1);
  BOOST_TEST(round.at_token() == 0u);
  BOOST_TEST(round.behind(0));
  BOOST_TEST(round.behind(3));
}

// Issue #31, reproduction 2: the last token lives on masters that now fail
// (an error, a timeout) or came back empty. Those that answered without a
// counter are not the whole story: no new key, the round fails. (It used to
// start again at token 1.)
BOOST_AUTO_TEST_CASE(a_master_that_failed_or_timed_out_is_unknown_not_empty) {
  auto round = fenced_round(5);
  for (std::size_t i = 0; i < 3; ++i) round.record(i, master_outcome::ok, t0 + 1ms, none);
  BOOST_TEST((round.record(3, master_outcome::failed, t0 + 1ms) == round_state::failed));
  BOOST_TEST((round.failure() == dlock::error::no_quorum));

  auto timed_out = fenced_round(5);
  for (std::size_t i = 0; i < 3; ++i) timed_out.record(i, master_outcome::ok, t0 + 1ms, none);
  BOOST_TEST((timed_out.time_out_pending(t0 + 50ms) == round_state::failed));
  BOOST_TEST(timed_out.fencing_token() == 0);
}

BOOST_AUTO_TEST_CASE(fencing_sees_an_old_key_through_a_late_counter) {
  auto round = fenced_round(5);
  for (std::size_t i = 0; i < 3; ++i) round.record(i, master_outcome::ok, t0 + 1ms, none);
  // One master has a counter: not a new key. A majority of counters is out
  // of reach, but every master's answer still settles it: wait for the last.
  BOOST_TEST((round.record(3, master_outcome::ok, t0 + 2ms, 9) == round_state::pending));
  auto all_answered = round;
  BOOST_TEST((all_answered.record(4, master_outcome::ok, t0 + 3ms, none) == round_state::acquired));
  BOOST_TEST(all_answered.fencing_token() == 9);
  BOOST_TEST(all_answered.at_token() == 1u);
  BOOST_TEST((round.time_out_pending(t0 + 50ms) == round_state::failed));
  BOOST_TEST((round.failure() == dlock::error::no_quorum));
}

// Counters on a minority only (one master restarted empty, two never got
// the last write-back): once every master answered, nothing is unseen and
// the largest is the token, so the key is not stuck for good.
BOOST_AUTO_TEST_CASE(fencing_with_every_master_answered_takes_the_largest_counter) {
  auto round = fenced_round(5);
  round.record(0, master_outcome::ok, t0 + 1ms, none);
  round.record(1, master_outcome::ok, t0 + 1ms, 6);
  round.record(2, master_outcome::ok, t0 + 1ms, 6);
  BOOST_TEST((round.record(3, master_outcome::ok, t0 + 1ms, none) == round_state::pending));
  BOOST_TEST((round.record(4, master_outcome::taken, t0 + 1ms, none) == round_state::acquired));
  BOOST_TEST(round.fencing_token() == 6);
  BOOST_TEST(round.at_token() == 2u);
}

BOOST_AUTO_TEST_CASE(without_fencing_counters_are_ignored) {
  auto round = make_round(3);
  round.record(0, master_outcome::ok, t0 + 1ms, 5);
  BOOST_TEST((round.record(1, master_outcome::ok, t0 + 1ms, none) == round_state::acquired));
  BOOST_TEST(round.fencing_token() == 0);
  BOOST_TEST(!round.behind(0));
}

// The rule above, shown over many rounds: masters that keep their counters,
// answer or fail (a failure that may still have applied its INCR), restart
// without their data, and write-backs that reach only some masters. Every
// token granted is larger than every earlier one, as long as not all the
// masters that held the last token lost their data at once: the limit
// RELIABILITY.md states. Under the old rule (a majority answering without a
// counter made a new key) this model finds a token that goes back.
namespace {

struct model_master {
  std::int64_t counter = none;  // none: no counter key
};

struct fencing_model {
  std::vector<model_master> masters;
  std::int64_t last_granted = 0;
  std::vector<bool> holds_last;  // had a counter >= last_granted at its grant, and kept it
  std::mt19937 random;

  fencing_model(std::size_t n, unsigned seed) : masters(n), holds_last(n, false), random(seed) {}

  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(random) < p; }

  // A master restarts empty unless it is the last one keeping the last token.
  void maybe_restart() {
    auto i = std::uniform_int_distribution<std::size_t>(0, masters.size() - 1)(random);
    auto keepers = std::count(holds_last.begin(), holds_last.end(), true);
    if (!chance(0.2) || (holds_last[i] && keepers <= 1)) return;
    masters[i].counter = none;
    holds_last[i] = false;
  }

  void round() {
    auto r = fenced_round(masters.size());
    std::vector<std::size_t> order(masters.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::shuffle(order.begin(), order.end(), random);
    for (auto i : order) {
      auto& m = masters[i];
      bool answers = chance(0.7);
      if (m.counter != none && (answers || chance(0.5))) ++m.counter;  // the script's INCR
      if (answers) r.record(i, master_outcome::ok, t0 + 1ms, m.counter);
      else r.record(i, chance(0.5) ? master_outcome::failed : master_outcome::timed_out, t0 + 1ms);
    }
    if (r.time_out_pending(t0 + 50ms) != round_state::acquired) return;
    auto token = r.fencing_token();
    std::size_t at_token = r.at_token();
    for (std::size_t i = 0; i < masters.size(); ++i)
      if (r.behind(i) && chance(0.8)) {
        masters[i].counter = std::max(masters[i].counter, token);  // the write-back
        ++at_token;
      }
    if (at_token < r.quorum()) return;  // the shell fails the attempt: no hold
    BOOST_TEST_REQUIRE(token > last_granted);
    last_granted = token;
    for (std::size_t i = 0; i < masters.size(); ++i) holds_last[i] = masters[i].counter >= token;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(fencing_tokens_never_go_back_over_failures_restarts_and_partial_write_backs) {
  std::int64_t granted = 0;
  for (std::size_t n : {3u, 5u, 7u})
    for (unsigned seed = 1; seed <= 200; ++seed) {
      fencing_model model(n, seed);
      for (int step = 0; step < 200; ++step) {
        model.maybe_restart();
        model.round();
      }
      granted += model.last_granted;
    }
  BOOST_TEST(granted > 0);  // rounds were won: the check above ran
}

// What the observer is told of a round: the first answer of each master
// (a resend's does not count), the ones still pending at the deadline as
// timed out, the decision; once, and nothing at all when nobody observes.
BOOST_AUTO_TEST_CASE(a_round_report_tells_each_masters_vote_once) {
  using dlock::master_answer;
  using dlock::redis::detail::round_report;
  const std::vector<std::string> names{"a:1", "b:2", "c:3"};
  const dlock::lock_id lock{"k", dlock::lock_kind::redlock};
  round_report report(true, names, dlock::round_kind::acquire);
  report.answered(0, master_outcome::ok, {}, t0, t0 + 3ms);
  report.answered(0, master_outcome::failed, make_error_code(dlock::error::closed), t0, t0 + 9ms);  // not counted
  report.answered(1, master_outcome::taken, {}, t0, t0 + 5ms);
  report.decided(make_error_code(dlock::error::taken), t0, t0 + 6ms);
  report.time_out_pending(t0, t0 + 50ms);
  auto told = report.settled(lock);
  BOOST_REQUIRE(told.has_value());
  BOOST_TEST(told->decision == make_error_code(dlock::error::taken));
  BOOST_TEST(told->decided_after.count() == std::chrono::nanoseconds(6ms).count());
  BOOST_REQUIRE(told->masters.size() == 3u);
  BOOST_TEST((told->masters[0].answer == master_answer::yes));
  BOOST_TEST(told->masters[0].latency.count() == std::chrono::nanoseconds(3ms).count());
  BOOST_TEST((told->masters[1].answer == master_answer::taken));
  BOOST_TEST((told->masters[2].answer == master_answer::timed_out));
  BOOST_TEST(told->masters[2].error == make_error_code(dlock::error::timed_out));
  BOOST_TEST(told->masters[2].master == "c:3");
  BOOST_TEST(!report.settled(lock).has_value());  // once

  round_report unobserved(false, names, dlock::round_kind::extend);
  unobserved.answered(0, master_outcome::ok, {}, t0, t0);
  BOOST_TEST(!unobserved.settled(lock).has_value());
}

BOOST_AUTO_TEST_CASE(masters_given_twice_or_null_are_refused) {
  using dlock::redis::detail::redlock_masters_invalid;
  dlock::redis::options a, b, a_again;
  a.host = "127.0.0.1", a.port = 7000;
  b.host = "127.0.0.1", b.port = 7001;
  a_again.host = "localhost", a_again.port = 7000;
  std::vector<const dlock::redis::options*> good{&a, &b};
  BOOST_TEST(redlock_masters_invalid(good).empty());
  std::vector<const dlock::redis::options*> with_null{&a, nullptr};
  BOOST_TEST(redlock_masters_invalid(with_null) == "redlock: a master is null");
  std::vector<const dlock::redis::options*> twice{&a, &b, &a};
  BOOST_TEST(redlock_masters_invalid(twice) == "redlock: master 127.0.0.1:7000 is given twice");
  std::vector<const dlock::redis::options*> by_name{&a, &a_again};
  BOOST_TEST(!redlock_masters_invalid(by_name).empty());  // localhost is 127.0.0.1
}

BOOST_AUTO_TEST_CASE(an_extension_outlasts_the_per_master_timeout) {
  using dlock::redis::detail::extend_ttl_invalid;
  BOOST_TEST(!extend_ttl_invalid(1000ms, 50ms));
  BOOST_TEST(extend_ttl_invalid(50ms, 50ms));
  BOOST_TEST(!extend_ttl_invalid(50ms, 0ms));  // one server: no per-master timeout
  BOOST_TEST(extend_ttl_invalid(0ms, 0ms));
  BOOST_TEST(extend_ttl_invalid(dlock::max_duration + 1ms, 0ms));
}

BOOST_AUTO_TEST_CASE(outcomes_are_described_per_master) {
  std::vector<std::string> names{"a:1", "b:2"};
  std::vector<master_outcome> outcomes{master_outcome::ok, master_outcome::timed_out};
  BOOST_TEST(dlock::redis::detail::describe(names, outcomes) == "a:1=ok b:2=timed_out");
}

BOOST_AUTO_TEST_SUITE_END()
