// The Redlock decisions taken answer by answer, without any server: an
// attempt's reactions (src/redis/locks/algorithm/attempt.hpp), the release and write-back
// quorums (algorithm/quorum.hpp) and the ledger of failed deletes
// (algorithm/cleanup_ledger.hpp). Each scenario runs once per step with a fault
// at that step (after Boost.MySQL's check_network_errors).
#include "redis/locks/algorithm/attempt.hpp"
#include "redis/locks/algorithm/cleanup_ledger.hpp"
#include "redis/locks/algorithm/quorum.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <functional>
#include <ostream>
#include <vector>

// Printable in failed checks (found by argument-dependent lookup).
namespace dlock {
inline std::ostream& operator<<(std::ostream& out, error e) { return out << make_error_code(e).message(); }
namespace redis {
inline std::ostream& operator<<(std::ostream& out, error e) { return out << make_error_code(e).message(); }
}  // namespace redis
namespace redis::detail {
inline std::ostream& operator<<(std::ostream& out, master_outcome o) { return out << to_string(o); }
}  // namespace redis::detail
}  // namespace dlock

using namespace std::chrono_literals;
namespace redis = dlock::redis;
using redis::reply;
using redis::detail::cleanup_ledger;
using redis::detail::master_outcome;
using redis::detail::redlock_attempt;
using redis::detail::redlock_clock;
using redis::detail::release_tally;
using redis::detail::round_state;
using redis::detail::write_back_tally;
using dlock::round_kind;
using error_code = dlock::error_code;

namespace {

const redlock_clock::time_point t0{std::chrono::seconds(1000)};
constexpr std::size_t five = 5;

const redis::detail::hold_commands& commands(bool fencing) {
  static const auto plain = redis::detail::hold_commands::redlock("k", false);
  static const auto fenced = redis::detail::hold_commands::redlock("k", true);
  return fencing ? fenced : plain;
}

redlock_attempt make_attempt(round_kind kind = round_kind::acquire, bool fencing = false) {
  return redlock_attempt(commands(fencing), kind, five, 10'000ms, {0.01, 2ms}, t0);
}

// One master's answer, as the connection delivers it.
struct answer {
  error_code ec;
  reply value;
};
answer yes() { return {{}, reply::make_status("OK")}; }
answer taken() { return {{}, reply::make_nil()}; }
answer lost() { return {make_error_code(redis::error::connection_lost), reply()}; }
answer noscript() { return {make_error_code(redis::error::script_not_run), reply()}; }
answer fenced(bool set, std::int64_t counter) {
  std::vector<reply> items{reply::make_integer(set ? 1 : 0), reply::make_bulk(std::to_string(counter))};
  return {{}, reply::make_array(std::move(items))};
}

// Runs `scenario(step)` once per step, the fault at that step; checks that
// every run did meet its fault (a fault never reached proves nothing).
void for_each_step(std::size_t steps, const std::function<bool(std::size_t)>& scenario) {
  for (std::size_t step = 0; step < steps; ++step) {
    BOOST_TEST_CONTEXT("fault at step " << step) { BOOST_TEST(scenario(step), "the fault was injected"); }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redlock_attempt_suite)

BOOST_AUTO_TEST_CASE(a_majority_of_yes_decides_at_the_third_answer) {
  auto a = make_attempt();
  for (std::size_t i = 0; i < five; ++i) {
    auto r = a.on_answer(i, yes().ec, yes().value, t0 + 1ms, false);
    BOOST_TEST(r.decided == (i == 2));
    BOOST_TEST((!r.resend && !r.release && !r.raise_counter));
    BOOST_TEST(r.outcome == master_outcome::ok);
  }
  BOOST_TEST(a.won());
  BOOST_TEST(a.round().validity_at_decision().count() == 10'000 - 1 - 102);
}

// A broken master at any step: the round is still won, at the answer that
// brings the third yes, and nothing is sent again.
BOOST_AUTO_TEST_CASE(a_broken_master_at_any_step_is_outvoted) {
  for_each_step(five, [](std::size_t fault) {
    auto a = make_attempt();
    std::size_t yes_count = 0, decided_at = five;
    for (std::size_t i = 0; i < five; ++i) {
      auto given = i == fault ? lost() : yes();
      auto r = a.on_answer(i, given.ec, given.value, t0 + 1ms, false);
      BOOST_TEST((!r.resend && !r.release));
      if (i != fault) ++yes_count;
      if (r.decided) decided_at = i;
    }
    BOOST_TEST(a.won());
    BOOST_TEST(decided_at == (fault <= 2 ? 3u : 2u));
    return yes_count == 4;
  });
}

// NOSCRIPT at any step: sent again once; the resent answer counts. A second
// NOSCRIPT from the same master counts as a failure.
BOOST_AUTO_TEST_CASE(a_script_not_run_at_any_step_is_sent_again_once) {
  for_each_step(five, [](std::size_t fault) {
    auto a = make_attempt();
    bool resent = false;
    for (std::size_t i = 0; i < five; ++i) {
      if (i == fault) {
        auto first = a.on_answer(i, noscript().ec, {}, t0 + 1ms, false);
        BOOST_TEST((first.resend && !first.decided && first.outcome == master_outcome::pending));
        resent = first.resend;
        auto second = a.on_answer(i, noscript().ec, {}, t0 + 1ms, false);
        BOOST_TEST(!second.resend);
        BOOST_TEST(second.outcome == master_outcome::failed);
        continue;
      }
      a.on_answer(i, yes().ec, yes().value, t0 + 1ms, false);
    }
    BOOST_TEST(a.won());
    return resent;
  });
}

// Each master is sent the script again once, whichever answered NOSCRIPT
// first: every pair of masters, in both orders.
BOOST_AUTO_TEST_CASE(two_masters_without_the_script_are_each_sent_it_again_once) {
  for (std::size_t first = 0; first < five; ++first)
    for (std::size_t second = 0; second < five; ++second) {
      if (first == second) continue;
      auto a = make_attempt();
      BOOST_TEST(a.on_answer(first, noscript().ec, {}, t0 + 1ms, false).resend);
      BOOST_TEST(a.on_answer(second, noscript().ec, {}, t0 + 1ms, false).resend);
      BOOST_TEST(!a.on_answer(first, noscript().ec, {}, t0 + 1ms, false).resend);
      BOOST_TEST(!a.on_answer(second, noscript().ec, {}, t0 + 1ms, false).resend);
    }
}

BOOST_AUTO_TEST_CASE(no_resend_once_the_deadline_passed) {
  auto a = make_attempt();
  auto r = a.on_answer(0, noscript().ec, {}, t0 + 1ms, true);
  BOOST_TEST(!r.resend);
  BOOST_TEST(r.outcome == master_outcome::failed);
}

// Three masters taken at any three steps: lost as `taken` at the third, and
// a yes that arrives after that is released again.
BOOST_AUTO_TEST_CASE(a_yes_after_a_lost_round_is_released_again) {
  for_each_step(five, [](std::size_t fault) {
    auto a = make_attempt();
    std::size_t late_releases = 0, late_yes = 0, takens = 0;
    bool decided = false;
    for (std::size_t i = 0; i < five; ++i) {
      // Master `fault` and the two after it (cyclically) say taken.
      bool is_taken = (i + five - fault) % five < 3;
      auto given = is_taken ? taken() : yes();
      auto r = a.on_answer(i, given.ec, given.value, t0 + 1ms, false);
      decided = decided || r.decided;
      BOOST_TEST(r.decided == (is_taken && ++takens == 3));
      if (decided && !is_taken && !r.decided) ++late_yes;
      if (r.release) ++late_releases;
    }
    BOOST_TEST(!a.won());
    BOOST_TEST(a.failure() == dlock::error::taken);
    BOOST_TEST(late_releases == late_yes);  // each yes after the decision, and only those
    // Decided at the third taken: at step 2, 3 or 4 as the takens wrap around.
    return late_yes == (fault == 0 ? 2u : fault == 1 ? 1u : 0u);
  });
}

BOOST_AUTO_TEST_CASE(the_deadline_fails_a_pending_round_and_a_late_yes_is_released) {
  auto a = make_attempt();
  a.on_answer(0, yes().ec, yes().value, t0 + 1ms, false);
  a.on_answer(1, yes().ec, yes().value, t0 + 1ms, false);
  BOOST_TEST(a.on_deadline(t0 + 50ms));
  BOOST_TEST(a.failure() == dlock::error::no_quorum);
  BOOST_TEST(!a.on_deadline(t0 + 60ms));  // decided once
  auto late = a.on_answer(2, yes().ec, yes().value, t0 + 70ms, true);
  BOOST_TEST(late.release);
  BOOST_TEST(!late.decided);
}

// An extend's compare-and-PEXPIRE is sent again after NOSCRIPT, as an
// acquire's SET script is: it is idempotent, and a flushed script cache must
// not cost the hold.
BOOST_AUTO_TEST_CASE(an_extend_not_run_is_sent_again_once) {
  for_each_step(five, [](std::size_t fault) {
    auto a = make_attempt(round_kind::extend);
    bool resent = false;
    for (std::size_t i = 0; i < five; ++i) {
      if (i == fault) resent = a.on_answer(i, noscript().ec, {}, t0 + 1ms, false).resend;
      a.on_answer(i, {}, reply::make_integer(1), t0 + 1ms, false);
    }
    BOOST_TEST(a.won());
    return resent;
  });
}

// With replica acknowledgement an extension's answer is gathered with WAIT's
// count: a NOSCRIPT inside it is the script's own, sent again once too.
BOOST_AUTO_TEST_CASE(a_script_not_run_inside_a_gathered_answer_is_sent_again_once) {
  auto c = redis::detail::hold_commands::redlock("k", false);
  c.wait_for_replicas(1, 100ms);
  auto gathered = [](reply own) {
    std::vector<reply> items;
    items.push_back(std::move(own));
    items.push_back(reply::make_integer(1));
    return reply::make_array(std::move(items));
  };
  for_each_step(five, [&](std::size_t fault) {
    redlock_attempt a(c, round_kind::extend, five, 10'000ms, {0.01, 2ms}, t0);
    bool resent = false;
    for (std::size_t i = 0; i < five; ++i) {
      if (i == fault) {
        resent = a.on_answer(i, {}, gathered(reply::make_error("NOSCRIPT No matching script")), t0 + 1ms, false).resend;
        auto again = a.on_answer(i, {}, gathered(reply::make_error("NOSCRIPT No matching script")), t0 + 1ms, false);
        BOOST_TEST((!again.resend && again.outcome == master_outcome::failed));
        continue;
      }
      a.on_answer(i, {}, gathered(reply::make_integer(1)), t0 + 1ms, false);
    }
    BOOST_TEST(a.won());
    return resent;
  });
}

BOOST_AUTO_TEST_CASE(an_extend_never_releases_on_its_own) {
  auto a = make_attempt(round_kind::extend);
  for (std::size_t i = 0; i < 3; ++i) a.on_answer(i, {}, reply::make_integer(0), t0 + 1ms, false);
  BOOST_TEST(a.failure() == dlock::error::taken);
  auto late = a.on_answer(3, {}, reply::make_integer(1), t0 + 1ms, false);
  BOOST_TEST(late.outcome == master_outcome::ok);
  BOOST_TEST(!late.release);  // the hold's loss releases every master
  auto odd = a.on_answer(4, {}, reply::make_status("OK"), t0 + 1ms, false);
  BOOST_TEST(odd.outcome == master_outcome::failed);
}

// Fencing: the token is the largest counter; the masters behind it are
// written back, and the hold waits for as many as a majority still needs.
BOOST_AUTO_TEST_CASE(a_fenced_win_writes_the_token_back_to_the_masters_behind_it) {
  auto a = make_attempt(round_kind::acquire, true);
  std::vector<answer> answers{fenced(true, 7), fenced(true, 6), fenced(true, 5), fenced(true, 7), fenced(true, -1)};
  for (std::size_t i = 0; i < five; ++i) a.on_answer(i, answers[i].ec, answers[i].value, t0 + 1ms, false);
  BOOST_TEST((a.round().state() == round_state::acquired));
  BOOST_TEST(a.round().fencing_token() == 7);
  auto targets = a.write_back_targets();
  BOOST_TEST((std::vector<std::size_t>(targets.begin(), targets.end()) == std::vector<std::size_t>{1, 2, 4}));
  BOOST_TEST(a.write_back_needed() == 1u);  // two hold it, three make a majority
  a.written_back({}, t0 + 2ms);
  BOOST_TEST(a.won());
}

BOOST_AUTO_TEST_CASE(a_write_back_that_ends_after_the_validity_is_expired) {
  auto a = make_attempt(round_kind::acquire, true);
  for (std::size_t i = 0; i < five; ++i) a.on_answer(i, {}, fenced(true, i == 0 ? 9 : 1).value, t0 + 1ms, false);
  BOOST_TEST((a.round().state() == round_state::acquired));
  a.written_back({}, t0 + 20s);
  BOOST_TEST(!a.won());
  BOOST_TEST(a.failure() == dlock::error::expired);
}

BOOST_AUTO_TEST_CASE(a_late_counter_behind_a_won_token_is_raised) {
  auto a = make_attempt(round_kind::acquire, true);
  for (std::size_t i = 0; i < 4; ++i) a.on_answer(i, {}, fenced(true, 4).value, t0 + 1ms, false);
  BOOST_TEST((a.round().state() == round_state::acquired));
  auto late = a.on_answer(4, {}, fenced(false, 2).value, t0 + 2ms, false);
  BOOST_TEST(late.raise_counter);
  BOOST_TEST(!late.release);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(release_tally_suite)

// A release of every master: a majority released decides it, whichever
// step a master broke at.
BOOST_AUTO_TEST_CASE(a_broken_master_at_any_step_still_releases_at_the_majority) {
  for_each_step(five, [](std::size_t fault) {
    release_tally tally(five, five);
    std::optional<error_code> outcome;
    std::size_t decided_at = five;
    for (std::size_t i = 0; i < five && !outcome; ++i) {
      auto given = i == fault ? lost() : answer{{}, reply::make_integer(1)};
      outcome = tally.record(given.ec, given.value);
      if (outcome) decided_at = i;
    }
    BOOST_TEST((outcome && !*outcome));
    BOOST_TEST(decided_at == (fault <= 2 ? 3u : 2u));
    return true;
  });
}

BOOST_AUTO_TEST_CASE(not_ours_or_broken_on_a_majority_is_told) {
  release_tally not_ours(five, five);
  std::optional<error_code> outcome;
  for (int i = 0; i < 3 && !outcome; ++i) outcome = not_ours.record({}, reply::make_integer(0));
  BOOST_TEST((outcome && *outcome == dlock::error::not_owned));
  release_tally broken(five, five);
  outcome.reset();
  for (int i = 0; i < 3 && !outcome; ++i) outcome = broken.record(lost().ec, {});
  BOOST_TEST((outcome && *outcome == dlock::error::no_quorum));
}

BOOST_AUTO_TEST_CASE(a_subset_is_told_once_all_answered_and_resends_once_per_master_asked) {
  release_tally tally(five, 1);
  BOOST_TEST(tally.resend(noscript().ec, false));
  BOOST_TEST(!tally.resend(noscript().ec, false));
  BOOST_TEST(!tally.record({}, reply::make_integer(1)));
  BOOST_TEST(!tally.all_answered());
  release_tally none(five, 1);
  none.record({}, reply::make_integer(0));
  BOOST_TEST(none.all_answered() == dlock::error::not_owned);
  BOOST_TEST(!none.resend(noscript().ec, true));  // not after the deadline
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(write_back_tally_suite)

// Two of three masters must confirm: a failure at any step decides as soon
// as the outcome is known.
BOOST_AUTO_TEST_CASE(a_failure_at_any_step) {
  for_each_step(3, [](std::size_t fault) {
    write_back_tally tally(7, 2, 3);
    BOOST_TEST(!tally.at_start());
    std::optional<error_code> outcome;
    std::size_t decided_at = 3;
    for (std::size_t i = 0; i < 3 && !outcome; ++i) {
      auto given = i == fault ? lost() : answer{{}, reply::make_bulk("7")};
      outcome = tally.record(given.ec, given.value);
      if (outcome) decided_at = i;
    }
    BOOST_TEST((outcome && !*outcome));
    BOOST_TEST(decided_at == (fault <= 1 ? 2u : 1u));
    return true;
  });
}

BOOST_AUTO_TEST_CASE(a_counter_below_the_token_does_not_confirm_and_too_few_left_fail) {
  write_back_tally tally(7, 2, 3);
  BOOST_TEST(!tally.record({}, reply::make_bulk("6")));
  auto outcome = tally.record(lost().ec, {});
  BOOST_TEST((outcome && *outcome == dlock::error::no_quorum));
  BOOST_TEST((write_back_tally(7, 3, 2).at_start() == make_error_code(dlock::error::no_quorum)));
  BOOST_TEST(write_back_tally::at_deadline() == dlock::error::no_quorum);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cleanup_ledger_suite)

BOOST_AUTO_TEST_CASE(a_lost_connection_is_watched_once_a_timeout_waits_for_the_next_set) {
  cleanup_ledger ledger(five);
  auto now = cleanup_ledger::clock::time_point(std::chrono::seconds(50));
  BOOST_TEST(!ledger.note(1, "a", make_error_code(redis::error::timed_out), now, 1000ms));
  BOOST_TEST(ledger.note(2, "b", lost().ec, now, 1000ms));
  BOOST_TEST(!ledger.note(2, "c", lost().ec, now, 1000ms));  // one wait per master
  ledger.reconnected(2);
  BOOST_TEST(ledger.note(2, "d", lost().ec, now, 1000ms));
  BOOST_TEST((ledger.take(2, now + 10ms) == std::vector<std::string>{"b", "c", "d"}));
  BOOST_TEST(ledger.take(2, now).empty());  // taken out
  BOOST_TEST(ledger.take(1, now + 2s).empty());  // past its TTL: dropped
  BOOST_TEST(ledger.empty());
}

BOOST_AUTO_TEST_CASE(the_ledger_is_bounded) {
  cleanup_ledger ledger(1);
  auto now = cleanup_ledger::clock::time_point(std::chrono::seconds(50));
  for (int i = 0; i < 100; ++i) ledger.note(0, std::to_string(i), make_error_code(redis::error::timed_out), now, 1s);
  BOOST_TEST(ledger.take(0, now).size() == 64u);
}

// The next attempt waits for the last delete in flight; a cancelled acquire
// forgets its wait and is never called.
BOOST_AUTO_TEST_CASE(waiters_run_once_no_delete_is_in_flight) {
  cleanup_ledger ledger(1);
  int first = 0, second = 0;
  ledger.sent();
  ledger.sent();
  ledger.after_settled(&first, [&] { ++first; });
  ledger.after_settled(&second, [&] { ++second; });
  ledger.forget(&second);
  BOOST_TEST(ledger.settled().empty());
  BOOST_TEST(ledger.in_flight());
  for (auto& waiter : ledger.settled()) waiter.then();
  BOOST_TEST(!ledger.in_flight());
  BOOST_TEST(first == 1);
  BOOST_TEST(second == 0);
  ledger.sent();
  BOOST_TEST(ledger.settled().empty());  // run once
}

BOOST_AUTO_TEST_SUITE_END()

// The same decisions for one server (redis::lock, redis::semaphore): the
// server's own answer is the outcome, never `no_quorum`, and only an answer
// that leaves doubt has its key deleted.
BOOST_AUTO_TEST_SUITE(one_server_attempt)

namespace {
using redis::detail::hold_commands;
redlock_attempt one_server(const hold_commands& c, round_kind kind = round_kind::acquire) {
  return redlock_attempt(c, kind, 1, 10'000ms, {0.01, 2ms}, t0);
}
const error_code wrong_type = redis::error::wrong_type;
}  // namespace

BOOST_AUTO_TEST_CASE(its_answer_is_the_outcome) {
  auto c = hold_commands::lock("k", false);
  struct expected {
    answer given;
    error_code failure;
    bool may_have_landed;
  };
  const expected cases[] = {
      {taken(), dlock::error::taken, false},
      {lost(), redis::error::connection_lost, true},                    // it may have run
      {{wrong_type, reply()}, wrong_type, false},                       // a plain SET refused: nothing ran
      {{{}, reply::make_integer(7)}, redis::error::protocol_error, true},  // a reply we did not expect
  };
  for (const auto& e : cases) {
    BOOST_TEST_CONTEXT(e.failure.message()) {
      auto a = one_server(c);
      auto r = a.on_answer(0, e.given.ec, e.given.value, t0 + 1ms, false);
      BOOST_TEST(r.decided);
      BOOST_TEST(!a.won());
      BOOST_TEST(a.failure() == e.failure);
      BOOST_TEST(a.may_have_landed() == e.may_have_landed);
    }
  }
  auto won = one_server(c);
  won.on_answer(0, yes().ec, yes().value, t0 + 1ms, false);
  BOOST_TEST(won.won());
  BOOST_TEST(!won.may_have_landed());
}

BOOST_AUTO_TEST_CASE(a_fenced_lock_takes_its_token_from_the_block_with_nothing_to_write_back) {
  auto c = hold_commands::lock("k", true);
  std::vector<reply> items{reply::make_status("OK"), reply::make_integer(42)};
  auto a = one_server(c);
  auto r = a.on_answer(0, {}, reply::make_array(std::move(items)), t0 + 1ms, false);
  BOOST_TEST(r.decided);
  BOOST_TEST(a.won());
  BOOST_TEST(a.round().fencing_token() == 42);
  BOOST_TEST(a.write_back_needed() == 0u);
  BOOST_TEST(a.write_back_targets().empty());
  // An error in the block after the SET ran: the server's error, and deleted.
  std::vector<reply> failed{reply::make_status("OK"), reply::make_error("ERR increment or decrement would overflow")};
  auto b = one_server(c);
  b.on_answer(0, {}, reply::make_array(std::move(failed)), t0 + 1ms, false);
  BOOST_TEST(!b.won());
  BOOST_TEST((b.failure().category() == redis::error_category()));
  BOOST_TEST(b.may_have_landed());
}

BOOST_AUTO_TEST_CASE(a_semaphore_admits_or_is_full) {
  auto c = hold_commands::semaphore("s", 2);
  auto full = one_server(c);
  full.on_answer(0, {}, reply::make_integer(0), t0 + 1ms, false);
  BOOST_TEST(full.failure() == dlock::error::taken);
  BOOST_TEST(!full.may_have_landed());
  auto admitted = one_server(c);
  admitted.on_answer(0, {}, reply::make_integer(1), t0 + 1ms, false);
  BOOST_TEST(admitted.won());
}

// An extension that failed to arrive leaves the hold to its validity; a key
// found gone, or an answer after the validity, loses it. A Redlock's is lost.
BOOST_AUTO_TEST_CASE(an_extension_loses_the_hold_only_when_the_key_is_gone_or_too_late) {
  auto c = hold_commands::lock("k", false);
  auto gone = one_server(c, round_kind::extend);
  gone.on_answer(0, {}, reply::make_integer(0), t0 + 1ms, false);
  BOOST_TEST(gone.extend_outcome(0ms).told == dlock::error::not_owned);
  BOOST_TEST(gone.extend_outcome(0ms).loses);
  auto broken = one_server(c, round_kind::extend);
  broken.on_answer(0, lost().ec, lost().value, t0 + 1ms, false);
  BOOST_TEST(broken.extend_outcome(0ms).told == redis::error::connection_lost);
  BOOST_TEST(!broken.extend_outcome(0ms).loses);
  auto in_time = one_server(c, round_kind::extend);
  in_time.on_answer(0, {}, reply::make_integer(1), t0 + 1ms, false);
  BOOST_TEST(!in_time.extend_outcome(0ms).told);
  // In time by the drift, not by the stall margin the hold keeps as well.
  BOOST_TEST(in_time.extend_outcome(10'000ms).told == dlock::error::expired);
  BOOST_TEST(in_time.extend_outcome(10'000ms).loses);
  auto late = one_server(c, round_kind::extend);
  late.on_answer(0, {}, reply::make_integer(1), t0 + 10'000ms, false);
  BOOST_TEST(!late.won());
  BOOST_TEST(late.extend_outcome(0ms).told == dlock::error::expired);
  BOOST_TEST(late.extend_outcome(0ms).loses);
  auto redlock = make_attempt(round_kind::extend);
  for (std::size_t i = 0; i < five; ++i) redlock.on_answer(i, lost().ec, lost().value, t0 + 1ms, false);
  BOOST_TEST(redlock.extend_outcome(0ms).told == dlock::error::lost);
  BOOST_TEST(redlock.extend_outcome(0ms).loses);
}

BOOST_AUTO_TEST_CASE(a_release_is_told_its_one_answer) {
  release_tally released(1, 1, true);
  BOOST_TEST((released.record({}, reply::make_integer(1)) == error_code()));
  release_tally not_ours(1, 1, true);
  BOOST_TEST((not_ours.record({}, reply::make_integer(0)) == make_error_code(dlock::error::not_owned)));
  release_tally broken(1, 1, true);
  BOOST_TEST((broken.record(lost().ec, reply()) == lost().ec));
  release_tally odd(1, 1, true);
  BOOST_TEST((odd.record({}, reply::make_nil()) == make_error_code(redis::error::protocol_error)));
}

BOOST_AUTO_TEST_SUITE_END()

// A failover replaced masters under a hold: it stands on a majority of the
// masters that granted it and were not replaced (one server: that one).
BOOST_AUTO_TEST_SUITE(failover_suite)
namespace detail = dlock::redis::detail;

BOOST_AUTO_TEST_CASE(a_hold_stands_while_a_majority_of_its_granting_masters_is_not_replaced) {
  using detail::master_outcome;
  constexpr auto ok = master_outcome::ok, ours = master_outcome::already_ours, no = master_outcome::taken,
                 late = master_outcome::timed_out;
  std::vector<master_outcome> granted{ok, ours, ok, no, late};
  auto stands = [&](std::vector<int> replaced_masters) {
    bool replaced[5] = {};
    for (int i : replaced_masters) replaced[i] = true;
    return detail::stands_after_failover(granted, replaced);
  };
  BOOST_TEST(stands({}));
  BOOST_TEST(stands({3, 4}));  // masters that did not grant it
  BOOST_TEST(!stands({0}));    // three granted it, one of them replaced: two left of five
  BOOST_TEST(!stands({1, 3}));
  std::vector<master_outcome> one{ok};
  bool none[1] = {false}, replaced[1] = {true};
  BOOST_TEST(detail::stands_after_failover(one, none));
  BOOST_TEST(!detail::stands_after_failover(one, replaced));
}

// The record the engine keeps: the epochs at the attempt's send, not at the
// hold's start, decide; a late yes of the last round counts, one of an
// earlier round does not.
BOOST_AUTO_TEST_CASE(a_grant_record_judges_a_hold_by_its_attempt_epochs_and_its_last_round) {
  using detail::master_outcome;
  constexpr auto ok = master_outcome::ok, late = master_outcome::timed_out;
  detail::grant_record record;
  std::vector<std::uint64_t> epochs{0, 0, 0};
  BOOST_TEST(!record.lost_to_failover(epochs));  // no hold yet
  record.attempt_sent({0, 0, 0});
  detail::redlock_round round(3, 10'000ms, {0.01, 2ms}, t0);  // yes, yes, then a timeout
  round.record(0, ok, t0 + 1ms);
  round.record(1, ok, t0 + 1ms);
  round.time_out_pending(t0 + 50ms);
  BOOST_TEST(round.outcome(2) == late);
  record.decided(1, round);
  record.hold_began();
  BOOST_TEST(!record.lost_to_failover(epochs));
  BOOST_TEST(!record.lost_to_failover(std::vector<std::uint64_t>{0, 0, 1}));  // did not grant it
  BOOST_TEST(record.lost_to_failover(std::vector<std::uint64_t>{1, 0, 0}));
  record.answered_late(1, 2, ok);  // a late yes: two of three stand with master 0 replaced
  BOOST_TEST(!record.lost_to_failover(std::vector<std::uint64_t>{1, 0, 0}));
  record.decided(2, round);  // an extension decided, then a late answer of round 1
  record.answered_late(1, 2, ok);
  BOOST_TEST(record.lost_to_failover(std::vector<std::uint64_t>{1, 0, 0}));
  // A master replaced between the attempt's send and the hold's start.
  record.attempt_sent({0, 0, 0});
  record.decided(3, round);
  record.hold_began();
  BOOST_TEST(record.lost_to_failover(std::vector<std::uint64_t>{0, 1, 0}));
}

BOOST_AUTO_TEST_CASE(a_token_not_above_the_last_given_went_back) {
  BOOST_TEST(!detail::token_went_back(8, 7));
  BOOST_TEST(detail::token_went_back(7, 7));
  BOOST_TEST(detail::token_went_back(1, 7));
  BOOST_TEST(!detail::token_went_back(0, 7));  // no fencing
  BOOST_TEST(!detail::token_went_back(1, 0));  // the first hold
}

BOOST_AUTO_TEST_SUITE_END()
