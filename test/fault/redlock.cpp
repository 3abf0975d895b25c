// dlock::redis::redlock while masters are stopped (SIGSTOP), killed and
// restarted empty. Every pause is undone by a guard, even when a check fails.
#include "integration/redlock_support.hpp"

#include <dlock/error.hpp>
#include <dlock/observer.hpp>
#include <dlock/redis/redlock.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <memory>
#include <cstdint>
#include <string>
#include <vector>

using namespace redlock_test;

namespace {

redis::redlock_options fault_options() {
  redis::redlock_options o;
  o.fencing = true;  // the faults meet the fencing path too
  o.ttl = 10000ms;
  o.master_timeout = 100ms;
  o.retry_count = 1;
  o.retry_delay = 50ms;
  o.retry_jitter = 10ms;
  return o;
}

// A key in use: its fencing counter on every master. A key no master has a
// counter for is new only once every master said so (src/redis/locks/algorithm/round.hpp), so
// a fresh key with masters stopped gets no token (shown by
// a_fencing_token_never_goes_back_past_masters_that_did_not_answer).
void seed_counters(const std::string& key) {
  for (std::size_t i = 0; i < 5; ++i) BOOST_REQUIRE_EQUAL(redis_cli(i, "SET " + key + ":fencing 1"), "OK");
}

std::chrono::microseconds since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t);
}

// 2 of 5 stopped: a majority remains, lock() decides at it.
asio::awaitable<void> two_stopped(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex);
  auto key = dlock::test::unique_name("redlock-two-down");
  seed_counters(key);
  redis::redlock a(ex, masters, key, fault_options());
  {
    paused stopped({3, 4});
    auto started = std::chrono::steady_clock::now();
    auto lock_a = a.acquire(tuple_token);
    auto [ec] = co_await std::move(lock_a);
    BOOST_REQUIRE_MESSAGE(!ec, ec.message() + " " + a.last_outcomes());
    // A figure for the log (the benchmark measures it properly), not a check.
    BOOST_TEST_MESSAGE("lock() with 2 of 5 stopped took " << since(started).count()
                                                          << " us; per-master timeout 100000 us; "
                                                          << a.last_outcomes());
    for (std::size_t i = 0; i < 3; ++i) BOOST_CHECK_EQUAL(get_key(i, key), a.token());
    auto unlock_a = a.release(tuple_token);
    auto [ec_u] = co_await std::move(unlock_a);
    auto released = a.released_masters();
    BOOST_CHECK(!ec_u);
    BOOST_CHECK_EQUAL(released, 3u);
  }
  // The stopped masters got the SET (and then the release) once resumed: no key anywhere.
  for (std::size_t i = 0; i < 5; ++i) {
    bool gone = co_await key_gone_eventually(i, key);
    BOOST_CHECK_MESSAGE(gone, "key left on master " << i);
  }
  close_all(masters);
}

// 3 of 5 stopped: no majority; lock() fails and leaves no key behind.
asio::awaitable<void> three_stopped(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex);
  auto key = dlock::test::unique_name("redlock-three-down");
  redis::redlock a(ex, masters, key, fault_options());
  {
    paused stopped({2, 3, 4});
    auto lock_a = a.acquire(tuple_token);
    auto [ec] = co_await std::move(lock_a);
    BOOST_CHECK(ec == dlock::error::no_quorum);
    BOOST_CHECK(!a.held());
    BOOST_CHECK_MESSAGE(a.last_outcomes().find("=timed_out") != std::string::npos, a.last_outcomes());
    for (std::size_t i = 0; i < 2; ++i) {
      bool gone = co_await key_gone_eventually(i, key);
      BOOST_CHECK_MESSAGE(gone, "key left on live master " << i);
    }
  }
  for (std::size_t i = 0; i < 5; ++i) {
    bool gone = co_await key_gone_eventually(i, key);
    BOOST_CHECK_MESSAGE(gone, "key left on master " << i << " after resume");
  }
  close_all(masters);
}

// Cancelling lock() in the middle of an attempt (3 masters stopped, long
// per-master timeout) leaves no key, on live and stopped masters alike.
asio::awaitable<void> cancel_mid_attempt(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex);
  auto key = dlock::test::unique_name("redlock-cancel");
  auto options = fault_options();
  options.master_timeout = 3000ms;
  redis::redlock a(ex, masters, key, options);
  {
    paused stopped({2, 3, 4});
    asio::cancellation_signal signal;
    asio::steady_timer timer(ex, 300ms);
    timer.async_wait([&signal](error_code) { signal.emit(asio::cancellation_type::terminal); });
    auto lock_a = a.acquire(asio::bind_cancellation_slot(signal.slot(), asio::as_tuple(asio::use_awaitable)));
    auto [ec] = co_await std::move(lock_a);
    BOOST_CHECK(ec == asio::error::operation_aborted);
    BOOST_CHECK(!a.held());
    for (std::size_t i = 0; i < 2; ++i) {
      bool gone = co_await key_gone_eventually(i, key);
      BOOST_CHECK_MESSAGE(gone, "key left on live master " << i);
    }
  }
  for (std::size_t i = 0; i < 5; ++i) {
    bool gone = co_await key_gone_eventually(i, key);
    BOOST_CHECK_MESSAGE(gone, "key left on master " << i << " after resume");
  }
  close_all(masters);
}

// A master killed and restarted empty while a lock is held: the other four
// still hold it, so a second client cannot reach a majority.
//
// The delayed-restart rule, shown: when a majority of masters (3 of 5) restart
// empty while the lock is held, a second client *does* acquire it. This is why
// masters without persistence must stay down for at least one TTL.
asio::awaitable<void> restart_empty(asio::any_io_executor ex) {
  auto masters_a = co_await connect_masters(ex);
  auto masters_b = co_await connect_masters(ex);
  auto key = dlock::test::unique_name("redlock-restart");
  redis::redlock a(ex, masters_a, key, fault_options());
  redis::redlock b(ex, masters_b, key, fault_options());
  auto lock_a = a.acquire(tuple_token);
  auto [ec] = co_await std::move(lock_a);
  BOOST_REQUIRE(!ec);

  dlock::test::server_action("kill", dlock::test::redis_name(0));
  dlock::test::server_action("restart", dlock::test::redis_name(0));
  BOOST_CHECK_EQUAL(redis_cli(0, "EXISTS " + key), "0");  // restarted empty
  co_await answers_again(*masters_b[0]);
  auto try_b = b.try_acquire(tuple_token);
  auto [ec_b] = co_await std::move(try_b);
  BOOST_CHECK(ec_b == dlock::error::taken);
  BOOST_CHECK(!b.held());
  BOOST_TEST_MESSAGE("one master restarted empty: " << b.last_outcomes());
  bool gone = co_await key_gone_eventually(0, key);  // b released its one key
  BOOST_CHECK(gone);

  // The unsafe case: a majority restarted empty within the TTL.
  for (std::size_t i = 1; i < 3; ++i) {
    dlock::test::server_action("kill", dlock::test::redis_name(i));
    dlock::test::server_action("restart", dlock::test::redis_name(i));
  }
  for (std::size_t i = 0; i < 3; ++i) co_await answers_again(*masters_b[i]);
  // lock() with retries: b's connections may still be reconnecting to the restarted masters.
  auto retrying = fault_options();
  retrying.retry_count = 10;
  {
    // With fencing (fault_options) the two counters left are no majority,
    // but every master answered: nothing is unseen, so the token is above
    // a's, and a resource that checks tokens refuses a from b's first write.
    redis::redlock fenced(ex, masters_b, key, retrying);
    auto [ec_f] = co_await fenced.acquire(tuple_token);
    BOOST_CHECK_MESSAGE(!ec_f, ec_f.message() + " " + fenced.last_outcomes());
    BOOST_CHECK_GT(fenced.fencing_token(), a.fencing_token());
    BOOST_TEST_MESSAGE("a majority restarted empty, fenced: token " << fenced.fencing_token() << " after a's "
                                                                     << a.fencing_token());
    co_await fenced.release(tuple_token);
  }
  retrying.fencing = false;
  redis::redlock b2(ex, masters_b, key, retrying);
  auto try_b2 = b2.acquire(tuple_token);
  auto [ec_b2] = co_await std::move(try_b2);
  BOOST_CHECK_MESSAGE(!ec_b2, "a majority restarted empty lets a second client in (" << ec_b2.message()
                                                                                   << "): restarts must be delayed");
  BOOST_TEST_MESSAGE("three masters restarted empty: " << b2.last_outcomes()
                                                       << ": both clients believe they hold the lock");
  BOOST_CHECK(a.held() && b2.held());
  auto unlock_b = b2.release(tuple_token);
  co_await std::move(unlock_b);
  auto unlock_a = a.release(tuple_token);
  co_await std::move(unlock_a);
  close_all(masters_a);
  close_all(masters_b);
}

// The holder's extension cannot reach a majority: it sees the loss.
asio::awaitable<void> extension_without_majority(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex);
  auto key = dlock::test::unique_name("redlock-extend-lost");
  auto options = fault_options();
  options.ttl = 1500ms;
  options.auto_extend = true;
  redis::redlock a(ex, masters, key, options);
  auto lock_a = a.acquire(tuple_token);
  auto [ec] = co_await std::move(lock_a);
  BOOST_REQUIRE(!ec);
  {
    paused stopped({0, 1, 2});
    auto wait = a.loss().wait(tuple_token);
    auto [why] = co_await std::move(wait);
    BOOST_CHECK(why == dlock::error::lost);
    BOOST_CHECK(a.loss().lost());
    BOOST_CHECK(!a.held());
    BOOST_TEST_MESSAGE("loss seen: " << a.last_outcomes());
  }
  // An explicit extend without a majority reports the loss too.
  redis::redlock b(ex, masters, dlock::test::unique_name("redlock-extend-lost-b"), fault_options());
  auto lock_b = b.acquire(tuple_token);
  auto [ec_b] = co_await std::move(lock_b);
  BOOST_REQUIRE(!ec_b);
  {
    paused stopped({2, 3, 4});
    auto ext = b.extend(5000ms, tuple_token);
    auto [ec_ext] = co_await std::move(ext);
    BOOST_CHECK(ec_ext == dlock::error::lost);
    BOOST_CHECK(b.loss().lost());
  }
  close_all(masters);
}

// 1,000 fenced acquisitions by two competing clients: a third of them with
// every master up, a third with two masters killed, the rest after those
// two came back empty (no counter: re-seeded). Tokens grow strictly throughout.
struct token_record {
  std::vector<std::int64_t> tokens;
  std::string failure;
  int done = 0;
};

asio::awaitable<void> take_turns(std::shared_ptr<redis::redlock> lock, std::shared_ptr<token_record> record,
                                 std::size_t until) {
  while (record->tokens.size() < until && record->failure.empty()) {
    auto [ec] = co_await lock->acquire(tuple_token);
    if (ec == dlock::error::taken) continue;
    if (ec) {
      record->failure = ec.message() + " " + lock->last_outcomes();
      break;
    }
    record->tokens.push_back(lock->fencing_token());
    co_await lock->release(tuple_token);
  }
  ++record->done;
}

asio::awaitable<void> turns_until(std::vector<std::shared_ptr<redis::redlock>> locks,
                                  std::shared_ptr<token_record> record, std::size_t until) {
  auto ex = co_await asio::this_coro::executor;
  record->done = 0;
  for (auto& lock : locks) asio::co_spawn(ex, take_turns(lock, record, until), asio::detached);
  while (record->done < static_cast<int>(locks.size())) co_await sleep_for(10ms);
  BOOST_REQUIRE_MESSAGE(record->failure.empty(), record->failure);
}

asio::awaitable<void> tokens_across_restarts(asio::any_io_executor ex) {
  auto key = dlock::test::unique_name("redlock-fenced-restarts");
  auto options = fault_options();
  options.retry_count = -1;
  options.wait_limit = 30s;
  options.retry_delay = 1ms;
  options.retry_jitter = 1ms;
  std::vector<masters_t> fleets;
  std::vector<std::shared_ptr<redis::redlock>> locks;
  for (int i = 0; i < 2; ++i) {
    fleets.push_back(co_await connect_masters(ex));
    locks.push_back(std::make_shared<redis::redlock>(ex, fleets.back(), key, options));
  }
  auto record = std::make_shared<token_record>();
  co_await turns_until(locks, record, 333);
  for (std::size_t i = 3; i < 5; ++i) dlock::test::server_action("kill", dlock::test::redis_name(i));
  co_await turns_until(locks, record, 666);
  for (std::size_t i = 3; i < 5; ++i) dlock::test::server_action("restart", dlock::test::redis_name(i));
  for (std::size_t i = 3; i < 5; ++i) {
    BOOST_CHECK_EQUAL(redis_cli(i, "EXISTS " + key + ":fencing"), "0");  // back empty
    for (auto& fleet : fleets) co_await answers_again(*fleet[i]);
  }
  co_await turns_until(locks, record, 1000);
  std::size_t bad = 0;
  for (std::size_t i = 1; i < record->tokens.size(); ++i)
    if (record->tokens[i] <= record->tokens[i - 1]) ++bad;
  BOOST_CHECK_MESSAGE(bad == 0, bad << " tokens did not grow, of " << record->tokens.size());
  BOOST_CHECK_GE(record->tokens.size(), 1000u);
  // The restarted masters were re-seeded by the rounds that followed: each
  // counter reached the last token. It may pass it: a master that answers
  // yes after its round was decided increments its counter past the token
  // that round chose (counters only grow; later tokens are larger still).
  auto last = record->tokens.back();
  for (std::size_t i = 3; i < 5; ++i) {
    std::int64_t counter = -1;
    for (int tries = 0; tries < 100 && counter < last; ++tries) {
      auto text = get_key(i, key + ":fencing");
      counter = text.empty() ? -1 : std::stoll(text);
      if (counter < last) co_await sleep_for(20ms);  // the write-back beyond the majority runs on
    }
    BOOST_CHECK_MESSAGE(counter >= last, "master " << i << ": counter " << counter << ", last token " << last);
  }
  locks.clear();
  for (auto& fleet : fleets) close_all(fleet);
}

// Issue #31, reproduction 2: a token that went back. Two masters refuse
// writes (at their memory limit: errors, no data lost) while a holder takes
// tokens, written to the other three only. Then one of those three restarts
// empty and the other two are stopped: the three that answer have no
// counter. Before, that was "a new key" and the token went back to 1.
// Masters that answered with an error or not at all are unknown, not empty:
// a new key needs every master's answer, and here no token is given until
// the stopped masters answer again; then it is above the last one.
struct refusing_writes {
  std::vector<std::size_t> indexes;
  explicit refusing_writes(std::vector<std::size_t> which) : indexes(std::move(which)) {
    for (auto i : indexes) {
      redis_cli(i, "CONFIG SET maxmemory-policy noeviction");
      BOOST_REQUIRE_EQUAL(redis_cli(i, "CONFIG SET maxmemory 1"), "OK");
    }
  }
  ~refusing_writes() {
    for (auto i : indexes) redis_cli(i, "CONFIG SET maxmemory 0");
  }
};

asio::awaitable<void> token_never_goes_back_past_unknown_masters(asio::any_io_executor ex) {
  auto key = dlock::test::unique_name("redlock-token-back");
  auto counter = key + ":fencing";
  auto masters = co_await connect_masters(ex);
  redis::redlock holder(ex, masters, key, fault_options());
  {
    refusing_writes full({3, 4});
    auto [ec] = co_await holder.acquire(tuple_token);
    BOOST_TEST_MESSAGE("a new key with two masters refusing writes: " << ec.message() << ", token "
                                                                      << holder.fencing_token() << ", "
                                                                      << holder.last_outcomes());
    BOOST_TEST((ec == dlock::error::no_quorum), "not a new key while two masters are unknown");
    if (!ec) co_await holder.release(tuple_token);
  }
  // The state the refused write-backs leave: the last token, 5, on three masters.
  for (std::size_t i = 0; i < 5; ++i) redis_cli(i, i < 3 ? "SET " + counter + " 5" : "DEL " + counter);
  dlock::test::server_action("kill", dlock::test::redis_name(0));
  dlock::test::server_action("restart", dlock::test::redis_name(0));
  co_await answers_again(*masters[0]);
  {
    paused stopped({1, 2});
    auto [ec] = co_await holder.acquire(tuple_token);
    BOOST_TEST_MESSAGE("with the last token's masters out of reach: " << ec.message() << ", token "
                                                                        << holder.fencing_token() << ", "
                                                                        << holder.last_outcomes());
    BOOST_TEST((ec == dlock::error::no_quorum), "no token from three masters that only look empty");
    BOOST_TEST(holder.fencing_token() == 0);
    if (!ec) co_await holder.release(tuple_token);
  }
  for (std::size_t i = 1; i < 3; ++i) co_await answers_again(*masters[i]);
  auto [ec] = co_await holder.acquire(tuple_token);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message() << " " << holder.last_outcomes());
  BOOST_TEST(holder.fencing_token() > 5);
  co_await holder.release(tuple_token);
  for (std::size_t i = 0; i < 5; ++i) redis_cli(i, "DEL " + counter);
  close_all(masters);
}

// What an observer hears of one round.
struct round_recorder final : dlock::observer {
  std::vector<std::vector<dlock::master_answer>> rounds;
  error_code decision;
  void on_redlock_round(const dlock::redlock_round& e) noexcept override {
    std::vector<dlock::master_answer> answers;
    for (const auto& vote : e.masters) answers.push_back(vote.answer);
    rounds.push_back(std::move(answers));
    decision = e.decision;
  }
};

// A stopped master (SIGSTOP) in an observed round: it timed out, the others said yes.
asio::awaitable<void> stopped_master_observed(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex);
  auto seen = std::make_shared<round_recorder>();
  auto options = fault_options();
  options.observer = seen;
  auto key = dlock::test::unique_name("redlock-observed-stop");
  seed_counters(key);
  redis::redlock lock(ex, masters, key, options);
  {
    paused stopped({4});
    auto [ec] = co_await lock.acquire(tuple_token);
    BOOST_REQUIRE_MESSAGE(!ec, ec.message() + " " + lock.last_outcomes());
    // Told once the round settled: at the stopped master's timeout.
    for (int i = 0; i < 500 && seen->rounds.empty(); ++i) co_await sleep_for(10ms);
    BOOST_REQUIRE_EQUAL(seen->rounds.size(), 1u);
    using answer = dlock::master_answer;
    BOOST_TEST((seen->rounds[0] ==
                std::vector<answer>{answer::yes, answer::yes, answer::yes, answer::yes, answer::timed_out}));
    BOOST_TEST(!seen->decision);
    auto [released] = co_await lock.release(tuple_token);
    BOOST_TEST(!released);
  }
  for (std::size_t i = 0; i < 5; ++i) {
    bool gone = co_await key_gone_eventually(i, key);
    BOOST_CHECK_MESSAGE(gone, "key left on master " << i << " after resume");
  }
  close_all(masters);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redlock_fault)

BOOST_AUTO_TEST_CASE(a_stopped_master_times_out_in_the_observed_round) { run(stopped_master_observed); }

BOOST_AUTO_TEST_CASE(two_of_five_stopped_still_locks) { run(two_stopped); }
BOOST_AUTO_TEST_CASE(a_fencing_token_never_goes_back_past_masters_that_did_not_answer) {
  run(token_never_goes_back_past_unknown_masters);
}
BOOST_AUTO_TEST_CASE(fencing_tokens_grow_with_two_masters_down_and_back_empty) { run(tokens_across_restarts); }
BOOST_AUTO_TEST_CASE(three_of_five_stopped_fails_and_leaves_no_key) { run(three_stopped); }
BOOST_AUTO_TEST_CASE(cancelled_lock_leaves_no_key) { run(cancel_mid_attempt); }
BOOST_AUTO_TEST_CASE(master_restarted_empty_does_not_admit_a_second_client) { run(restart_empty); }
BOOST_AUTO_TEST_CASE(extension_without_a_majority_is_a_loss) { run(extension_without_majority); }

BOOST_AUTO_TEST_SUITE_END()
