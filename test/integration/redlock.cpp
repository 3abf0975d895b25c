// dlock::redis::redlock against five real redis-server masters: exclusion,
// wire compatibility with redsync / node-redlock scripts run by redis-cli,
// extension, auto-extension, bad input.
#include "redlock_support.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/redlock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

using namespace redlock_test;

namespace {

redis::redlock_options quick_options() {
  redis::redlock_options o;
  o.ttl = 5000ms;
  o.master_timeout = 200ms;  // generous: the tests run under sanitizers on busy cores
  return o;
}

// ---------------------------------------------------------------- basic cycle

asio::awaitable<void> lock_unlock_cycle(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex);
  auto key = dlock::test::unique_name("redlock-cycle");
  redis::redlock a(ex, masters, key, quick_options());
  redis::redlock b(ex, masters, key, quick_options());

  auto lock_a = a.acquire(tuple_token);
  auto [ec] = co_await std::move(lock_a);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message() + " " + a.last_outcomes());
  BOOST_CHECK(a.held());
  BOOST_CHECK(a.validity() > 0ms);
  BOOST_CHECK(a.validity() <= 5000ms);
  BOOST_CHECK_EQUAL(a.token().size(), 32u);
  for (std::size_t i = 0; i < 5; ++i) BOOST_CHECK_EQUAL(get_key(i, key), a.token());

  auto again = a.acquire(tuple_token);
  auto [ec_again] = co_await std::move(again);
  BOOST_CHECK(ec_again == dlock::error::already_held);

  auto try_b = b.try_acquire(tuple_token);
  auto [ec_b] = co_await std::move(try_b);
  BOOST_CHECK(ec_b == dlock::error::taken);
  BOOST_CHECK(!b.held());
  BOOST_CHECK_MESSAGE(b.last_outcomes().find("=taken") != std::string::npos, b.last_outcomes());
  // b's failed attempt released only its own token: a's keys are intact.
  for (std::size_t i = 0; i < 5; ++i) BOOST_CHECK_EQUAL(get_key(i, key), a.token());

  auto unlock_a = a.release(tuple_token);
  auto [ec_u] = co_await std::move(unlock_a);
  auto released = a.released_masters();
  BOOST_CHECK_MESSAGE(!ec_u, ec_u.message() + "; " + a.last_outcomes());
  BOOST_CHECK_GE(released, 3u);  // completes at the majority; the rest follow
  BOOST_CHECK(!a.held());
  BOOST_CHECK(a.validity() == 0ms);
  for (std::size_t i = 0; i < 5; ++i) {
    bool gone = co_await key_gone_eventually(i, key);
    BOOST_CHECK(gone);
  }

  auto unlock_twice = a.release(tuple_token);
  auto [ec_twice] = co_await std::move(unlock_twice);
  BOOST_CHECK(!ec_twice);  // the contract: a second release is a no-op that succeeds
  auto extend_free = a.extend(1000ms, tuple_token);
  auto [ec_ext] = co_await std::move(extend_free);
  BOOST_CHECK(ec_ext == dlock::error::not_held);

  // Now b gets it, with a fresh token.
  auto lock_b = b.acquire(tuple_token);
  auto [ec_b2] = co_await std::move(lock_b);
  BOOST_REQUIRE(!ec_b2);
  BOOST_CHECK(b.token() != a.token());
  auto unlock_b = b.release(tuple_token);
  co_await std::move(unlock_b);
  close_all(masters);
}

// ------------------------------------------------------------ wire compatibility

// The scripts redsync and node-redlock use, typed here by hand (not taken from dlock).
const std::string release_by_hand =
    "'if redis.call(\"get\",KEYS[1]) == ARGV[1] then return redis.call(\"del\",KEYS[1]) else return 0 end'";
const std::string extend_by_hand =
    "'if redis.call(\"GET\", KEYS[1]) == ARGV[1] then return redis.call(\"PEXPIRE\", KEYS[1], ARGV[2]) "
    "else return 0 end'";

asio::awaitable<void> wire_compatibility(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex);
  auto key = dlock::test::unique_name("redlock-wire");
  redis::redlock a(ex, masters, key, quick_options());
  auto lock_a = a.acquire(tuple_token);
  auto [ec] = co_await std::move(lock_a);
  BOOST_REQUIRE(!ec);
  // The plain token, as SET NX PX wrote it, on every master.
  for (std::size_t i = 0; i < 5; ++i) {
    BOOST_CHECK_EQUAL(redis_cli(i, "TYPE " + key), "string");
    BOOST_CHECK_EQUAL(get_key(i, key), a.token());
  }
  // Another client's extend script recognises our token...
  BOOST_CHECK_EQUAL(redis_cli(0, "EVAL " + extend_by_hand + " 1 " + key + " " + a.token() + " 60000"), "1");
  BOOST_CHECK_GT(std::stol(redis_cli(0, "PTTL " + key)), 10000);
  // ...and a wrong token changes nothing.
  BOOST_CHECK_EQUAL(redis_cli(1, "EVAL " + release_by_hand + " 1 " + key + " not-the-token"), "0");
  // Another client's release script deletes our key on master 2.
  BOOST_CHECK_EQUAL(redis_cli(2, "EVAL " + release_by_hand + " 1 " + key + " " + a.token()), "1");
  BOOST_CHECK_EQUAL(redis_cli(2, "EXISTS " + key), "0");
  // Our extend still has a majority (4 of 5) and sets the TTL everywhere it holds.
  auto ext = a.extend(20000ms, tuple_token);
  auto [ec_ext] = co_await std::move(ext);
  BOOST_CHECK(!ec_ext);
  auto pttl = co_await pttl_once_above(3, key, 10000);
  BOOST_CHECK_GT(pttl, 10000);
  BOOST_CHECK_LE(pttl, 20000);
  BOOST_CHECK(a.validity() > 10000ms);
  auto unlock_a = a.release(tuple_token);
  auto [ec_u] = co_await std::move(unlock_a);
  auto released = a.released_masters();
  BOOST_CHECK_MESSAGE(!ec_u, ec_u.message() + "; " + a.last_outcomes());
  BOOST_CHECK_GE(released, 3u);
  for (std::size_t i = 0; i < 5; ++i) {
    bool gone = co_await key_gone_eventually(i, key);
    BOOST_CHECK(gone);
  }

  // A lock taken by another client (SET NX PX by hand on 3 masters) is respected,
  // and our failed attempt neither touches it nor leaves keys on the free masters.
  auto key2 = dlock::test::unique_name("redlock-foreign");
  for (std::size_t i = 0; i < 3; ++i)
    BOOST_CHECK_EQUAL(redis_cli(i, "SET " + key2 + " foreign-token NX PX 30000"), "OK");
  redis::redlock c(ex, masters, key2, quick_options());
  auto try_c = c.try_acquire(tuple_token);
  auto [ec_c] = co_await std::move(try_c);
  BOOST_CHECK(ec_c == dlock::error::taken);
  for (std::size_t i = 3; i < 5; ++i) {
    bool gone = co_await key_gone_eventually(i, key2);
    BOOST_CHECK(gone);
  }
  for (std::size_t i = 0; i < 3; ++i) BOOST_CHECK_EQUAL(get_key(i, key2), "foreign-token");
  for (std::size_t i = 0; i < 3; ++i) redis_cli(i, "DEL " + key2);
  close_all(masters);
}

// -------------------------------------------------------------- one master

asio::awaitable<void> single_master(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto key = dlock::test::unique_name("redlock-one");
  redis::redlock a(ex, masters, key, quick_options());
  redis::redlock b(ex, masters, key, quick_options());
  auto lock_a = a.acquire(tuple_token);
  auto [ec] = co_await std::move(lock_a);
  BOOST_REQUIRE(!ec);
  auto try_b = b.try_acquire(tuple_token);
  auto [ec_b] = co_await std::move(try_b);
  BOOST_CHECK(ec_b == dlock::error::taken);
  auto unlock_a = a.release(tuple_token);
  auto [ec_u] = co_await std::move(unlock_a);
  auto released = a.released_masters();
  BOOST_CHECK_MESSAGE(!ec_u, ec_u.message() + "; " + a.last_outcomes());
  BOOST_CHECK_EQUAL(released, 1u);
  close_all(masters);
}

// ------------------------------------------------------------ auto-extension

asio::awaitable<void> auto_extension_keeps_it(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex);
  auto key = dlock::test::unique_name("redlock-auto");
  auto options = quick_options();
  options.ttl = 600ms;
  options.master_timeout = 100ms;
  options.auto_extend = true;
  redis::redlock a(ex, masters, key, options);
  auto lock_a = a.acquire(tuple_token);
  auto [ec] = co_await std::move(lock_a);
  BOOST_REQUIRE(!ec);
  co_await sleep_for(3000ms);  // five TTLs
  BOOST_CHECK(a.held());
  BOOST_CHECK(!a.loss().lost());
  for (std::size_t i = 0; i < 5; ++i) BOOST_CHECK_EQUAL(get_key(i, key), a.token());
  auto unlock_a = a.release(tuple_token);
  auto [ec_u] = co_await std::move(unlock_a);
  auto released = a.released_masters();
  BOOST_CHECK_MESSAGE(!ec_u, ec_u.message() + "; " + a.last_outcomes());
  BOOST_CHECK_GE(released, 3u);
  // No extension outlives unlock(): the keys stay gone.
  co_await sleep_for(800ms);
  for (std::size_t i = 0; i < 5; ++i) BOOST_CHECK_EQUAL(redis_cli(i, "EXISTS " + key), "0");
  close_all(masters);
}

// Without extension the holder is told when its validity runs out.
asio::awaitable<void> validity_runs_out(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex);
  auto key = dlock::test::unique_name("redlock-expire");
  auto options = quick_options();
  options.ttl = 400ms;
  options.master_timeout = 100ms;
  redis::redlock a(ex, masters, key, options);
  auto lock_a = a.acquire(tuple_token);
  auto [ec] = co_await std::move(lock_a);
  BOOST_REQUIRE(!ec);
  auto wait = a.loss().wait(tuple_token);
  auto [why] = co_await std::move(wait);
  BOOST_CHECK(why == dlock::error::lost);
  BOOST_CHECK(!a.held());
  auto extending = a.extend(400ms, tuple_token);
  auto [ec_e] = co_await std::move(extending);
  BOOST_CHECK_MESSAGE(ec_e == dlock::error::lost, "extend after the loss: " << ec_e.message());  // as redis::lock
  auto unlock_a = a.release(tuple_token);
  auto [ec_u] = co_await std::move(unlock_a);
  BOOST_CHECK(ec_u == dlock::error::lost);  // the contract: a release after a loss tells the loss reason
  BOOST_CHECK_EQUAL(a.released_masters(), 0u);
  close_all(masters);
}

// ------------------------------------------------------------ mutual exclusion

struct exclusion_state {
  int inside = 0;
  int max_inside = 0;
  int sections = 0;
  int unexpected = 0;
};

asio::awaitable<void> contender(asio::any_io_executor ex, masters_t masters, std::string key,
                                exclusion_state* state, int rounds) {
  redis::redlock_options o;
  o.ttl = 10000ms;
  o.master_timeout = 500ms;
  o.retry_count = -1;
  o.wait_limit = 600s;
  o.retry_delay = 30ms;
  o.retry_jitter = 20ms;
  redis::redlock l(ex, masters, key, o);
  for (int done = 0; done < rounds;) {
    auto acquire = l.acquire(tuple_token);
    auto [ec] = co_await std::move(acquire);
    if (ec) {
      if (ec != dlock::error::taken && ec != dlock::error::no_quorum && ec != dlock::error::expired)
        ++state->unexpected;
      continue;
    }
    state->max_inside = std::max(state->max_inside, ++state->inside);
    ++state->sections;
    auto yield = asio::post(ex, tuple_token);  // let every other coroutine run meanwhile
    co_await std::move(yield);
    --state->inside;
    auto release = l.release(tuple_token);
    auto [ec_u] = co_await std::move(release);
    if (ec_u) ++state->unexpected;
    ++done;
  }
}

asio::awaitable<void> contenders_done(exclusion_state* state, int expected) {
  while (state->sections < expected && state->unexpected == 0) co_await sleep_for(100ms);
}

void detached_check(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}

asio::awaitable<void> mutual_exclusion(asio::any_io_executor ex) {
  constexpr int sets = 3, per_set = 32, rounds = 50;
  auto key = dlock::test::unique_name("redlock-mutex");
  std::vector<masters_t> connection_sets;
  for (int s = 0; s < sets; ++s) {
    auto set = co_await connect_masters(ex);
    connection_sets.push_back(std::move(set));
  }
  exclusion_state state;
  for (int s = 0; s < sets; ++s)
    for (int c = 0; c < per_set; ++c)
      asio::co_spawn(ex, contender(ex, connection_sets[s], key, &state, rounds), detached_check);
  co_await contenders_done(&state, sets * per_set * rounds);
  BOOST_CHECK_EQUAL(state.unexpected, 0);
  BOOST_CHECK_EQUAL(state.max_inside, 1);
  BOOST_CHECK_EQUAL(state.sections, sets * per_set * rounds);
  // The contenders finish their last unlock; then close.
  co_await sleep_for(200ms);
  for (auto& set : connection_sets) close_all(set);
}


// ------------------------------------------- one hold at a time (F2, F3)

asio::awaitable<void> flush_scripts_until(std::shared_ptr<redis::connection> side, std::shared_ptr<bool> stop) {
  while (!*stop) {
    auto flush = side->exec(redis::command{"SCRIPT", "FLUSH"}, tuple_token);
    co_await std::move(flush);
  }
}

// F2: a failed attempt's cleanup (a compare-and-delete) must never delete the
// key of the next attempt. With the script cache flushed all the time, every
// cleanup takes a NOSCRIPT round trip; with no pause between attempts the
// next SET used to overtake it (same token), and the late cleanup deleted the
// key the attempt had just counted as won.
asio::awaitable<void> cleanup_never_deletes_the_next_attempts_key(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto side = co_await connect_masters(ex, 1);
  auto check = co_await connect_masters(ex, 1);
  auto key = dlock::test::unique_name("redlock-cleanup-order");
  auto o = quick_options();
  o.ttl = 10s;
  o.retry_count = -1;
  o.retry_delay = 0ms;
  o.retry_jitter = 0ms;
  o.wait_limit = 3s;
  redis::redlock a(ex, masters, key, o);
  auto stop = std::make_shared<bool>(false);
  asio::co_spawn(ex, flush_scripts_until(side[0], stop), asio::detached);
  int missing = 0;
  constexpr int rounds = 30;
  for (int i = 0; i < rounds; ++i) {
    auto set = check[0]->exec(redis::command{"SET", key, "other", "PX", "60"}, tuple_token);
    auto [set_ec, set_reply] = co_await std::move(set);
    BOOST_REQUIRE(!set_ec && set_reply.is_ok());
    auto acquire = a.acquire(tuple_token);
    auto [ec] = co_await std::move(acquire);
    BOOST_REQUIRE_MESSAGE(!ec, ec.message() + " " + a.last_outcomes());
    co_await sleep_for(10ms);
    auto get = check[0]->exec(redis::command{"GET", key}, tuple_token);
    auto [get_ec, value] = co_await std::move(get);
    BOOST_REQUIRE(!get_ec);
    if (!value.is_bulk() || value.string() != a.token()) ++missing;
    auto release = a.release(tuple_token);
    co_await std::move(release);
    auto del = check[0]->exec(redis::command{"DEL", key}, tuple_token);
    co_await std::move(del);
  }
  *stop = true;
  BOOST_CHECK_MESSAGE(missing == 0, missing << " of " << rounds << " keys were gone right after acquire succeeded");
  co_await sleep_for(50ms);
  close_all(masters);
  close_all(side);
  close_all(check);
}

// F3: a release not awaited, then an acquire. The acquire is refused with
// in_progress while the release runs (the release used to read the token
// after the acquire had replaced it and delete the new hold's keys); once
// the release is done, the next acquire holds every master with its token.
asio::awaitable<void> release_then_acquire(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 3);
  auto key = dlock::test::unique_name("redlock-one-at-a-time");
  auto o = quick_options();
  // Short enough that a release lands around an extension (every ttl / 3),
  // long enough that a master's answer under sanitizers on a loaded host
  // still comes within master_timeout: a release that timed out on a master
  // leaves the old key there, which the check below would take for F3.
  o.ttl = 600ms;
  o.master_timeout = 200ms;
  o.auto_extend = true;
  o.retry_delay = 10ms;
  o.retry_jitter = 5ms;
  redis::redlock l(ex, masters, key, o);
  for (int round = 0; round < 3; ++round) {
    auto first = l.acquire(tuple_token);
    auto [ec] = co_await std::move(first);
    BOOST_REQUIRE_MESSAGE(!ec, ec.message() + " " + l.last_outcomes());
    co_await sleep_for(std::chrono::milliseconds(200 + 10 * round));  // around an extension
    auto released = std::make_shared<std::optional<error_code>>();
    l.release([released](error_code e) { *released = e; });
    auto second = l.acquire(tuple_token);
    auto [ec2] = co_await std::move(second);
    if (ec2) {
      BOOST_CHECK_MESSAGE(ec2 == dlock::error::in_progress, ec2.message());
      for (int i = 0; i < 200 && !released->has_value(); ++i) co_await sleep_for(5ms);
      BOOST_REQUIRE(released->has_value());
      auto third = l.acquire(tuple_token);
      auto [ec3] = co_await std::move(third);
      BOOST_REQUIRE_MESSAGE(!ec3, ec3.message() + " " + l.last_outcomes());
    }
    co_await sleep_for(30ms);
    for (std::size_t i = 0; i < 3; ++i)
      BOOST_CHECK_MESSAGE(get_key(i, key) == l.token(), "round " << round << " master " << i << ": '"
                                                                  << get_key(i, key) << "' (" << l.last_outcomes() << ")");
    BOOST_CHECK(l.held());
    auto release = l.release(tuple_token);
    auto [ec_u] = co_await std::move(release);
    BOOST_CHECK_MESSAGE(!ec_u, ec_u.message());
  }
  // A second acquire while the first still runs is refused too.
  redis::redlock holder(ex, masters, key, quick_options());
  auto hold = holder.acquire(tuple_token);
  auto [ec_h] = co_await std::move(hold);
  BOOST_REQUIRE(!ec_h);
  auto first = std::make_shared<std::optional<error_code>>();
  l.acquire([first](error_code e) { *first = e; });
  auto overlapping = l.try_acquire(tuple_token);
  auto [ec_o] = co_await std::move(overlapping);
  BOOST_CHECK_MESSAGE(ec_o == dlock::error::in_progress, ec_o.message());
  auto free = holder.release(tuple_token);
  co_await std::move(free);
  for (int i = 0; i < 200 && !first->has_value(); ++i) co_await sleep_for(10ms);
  BOOST_REQUIRE(first->has_value());
  BOOST_CHECK_MESSAGE(!**first, (*first)->message());
  auto last = l.release(tuple_token);
  co_await std::move(last);
  co_await sleep_for(50ms);
  close_all(masters);
}


// Destroying a redlock ends its acquire in progress: it never takes the keys
// afterwards (they would stay for the TTL, with nobody to release them).
asio::awaitable<void> destroyed_while_acquiring(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 3);
  auto key = dlock::test::unique_name("redlock-gone");
  redis::redlock holder(ex, masters, key, quick_options());
  auto hold = holder.acquire(tuple_token);
  auto [ec_h] = co_await std::move(hold);
  BOOST_REQUIRE(!ec_h);
  auto o = quick_options();
  o.retry_count = -1;
  o.wait_limit = 10s;
  o.retry_delay = 10ms;
  o.retry_jitter = 2ms;
  auto waiter = std::make_unique<redis::redlock>(ex, masters, key, o);
  auto result = std::make_shared<std::optional<error_code>>();
  waiter->acquire([result](error_code e) { *result = e; });
  co_await sleep_for(60ms);
  BOOST_REQUIRE(!result->has_value());
  waiter.reset();
  auto free = holder.release(tuple_token);
  co_await std::move(free);
  co_await sleep_for(200ms);
  BOOST_REQUIRE(result->has_value());
  BOOST_CHECK_MESSAGE(**result == asio::error::operation_aborted, (*result)->message());
  for (std::size_t i = 0; i < 3; ++i) BOOST_CHECK_MESSAGE(get_key(i, key).empty(), "master " << i << ": " << get_key(i, key));
  close_all(masters);
}

// F10: the acquire sends only `SET key token NX PX ttl`, which every Redis
// since 2.6.12 accepts (`SET ... NX GET` needs 7.0). Seen in the server's
// slow log, with every command logged.
asio::awaitable<void> acquire_uses_plain_set_nx_px(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto key = dlock::test::unique_name("redlock-plain-set");
  auto old_threshold = redis_cli(0, "CONFIG GET slowlog-log-slower-than");
  redis_cli(0, "CONFIG SET slowlog-max-len 100000");
  redis_cli(0, "CONFIG SET slowlog-log-slower-than 0");
  redis::redlock l(ex, masters, key, quick_options());
  auto acquire = l.acquire(tuple_token);
  auto [ec] = co_await std::move(acquire);
  redis_cli(0, "CONFIG SET slowlog-log-slower-than 10000");
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  auto log = redis_cli(0, "SLOWLOG GET 100000");
  auto at = log.find(key + "\n" + l.token() + "\nNX\n");
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, "no SET of our key in the slow log");
  auto after = log.substr(at + key.size() + l.token().size() + 5, 3);
  BOOST_CHECK_MESSAGE(after == "PX\n", "SET ... NX is followed by '" << after << "'");
  auto release = l.release(tuple_token);
  co_await std::move(release);
  close_all(masters);
}

// ------------------------------------------------------------------- bad input

// The contract: bad arguments never throw; the first acquire is refused at
// once with invalid_argument (and the reason is kept). Runs `io` until then.
bool refused(asio::io_context& io, const masters_t& masters, std::string key, redis::redlock_options options) {
  redis::redlock l(io.get_executor(), masters, std::move(key), options);
  std::optional<error_code> result;
  l.try_acquire([&result](error_code ec) { result = ec; });
  io.restart();
  while (!result && io.run_one() > 0) {}
  BOOST_TEST_MESSAGE("refused: " << l.invalid_reason());
  return result == make_error_code(dlock::error::invalid_argument) && l.invalid_reason().rfind("redlock:", 0) == 0;
}


}  // namespace

BOOST_AUTO_TEST_SUITE(redlock_integration)

BOOST_AUTO_TEST_CASE(lock_try_lock_unlock) { run(lock_unlock_cycle); }
BOOST_AUTO_TEST_CASE(keys_interoperate_with_redsync_scripts) { run(wire_compatibility); }
BOOST_AUTO_TEST_CASE(one_master_is_a_single_lock) { run(single_master); }
BOOST_AUTO_TEST_CASE(auto_extension_holds_past_the_ttl) { run(auto_extension_keeps_it); }
BOOST_AUTO_TEST_CASE(holder_is_told_when_validity_runs_out) { run(validity_runs_out); }
BOOST_AUTO_TEST_CASE(mutual_exclusion_3_sets_32_coroutines_50_rounds) { run(mutual_exclusion); }

BOOST_AUTO_TEST_CASE(failed_attempt_cleanup_never_deletes_the_next_attempts_key) {
  run(cleanup_never_deletes_the_next_attempts_key);
}
BOOST_AUTO_TEST_CASE(release_not_awaited_then_acquire_one_operation_at_a_time) { run(release_then_acquire); }
BOOST_AUTO_TEST_CASE(destroyed_while_acquiring_never_takes_the_keys) { run(destroyed_while_acquiring); }
BOOST_AUTO_TEST_CASE(acquire_sends_set_nx_px_without_get) { run(acquire_uses_plain_set_nx_px); }

namespace {

// Acquires on three masters, then releases while the third one's connection
// is held up by a blocking command: the release completes on the other two,
// and its delete on the third is owed for ever.
asio::awaitable<void> release_with_an_answer_owed(masters_t* masters, std::string key, bool* done) {
  *masters = co_await connect_masters(co_await asio::this_coro::executor, 3);
  redis::redlock lock(co_await asio::this_coro::executor, *masters, key, {.ttl = 2000ms});
  auto [acquired] = co_await lock.acquire(tuple_token);
  BOOST_REQUIRE(!acquired);
  (*masters)[2]->exec(redis::command("BLPOP", key + "-never", "0"), [](error_code, redis::reply) {});
  auto [released] = co_await lock.release(tuple_token);
  BOOST_CHECK(!released);
  *done = true;
}

}  // namespace

// The io_context destroyed while a master still owes an answer: what dlock
// kept for it goes with the io_context, as Asio's own pending handlers do.
// Before, the owed request's sink (the release) kept the redlock, which kept
// the connections, which kept the request: a cycle (integration.threads saw
// it as a leak, once in about 75 runs).
BOOST_AUTO_TEST_CASE(an_io_context_destroyed_with_an_answer_owed_keeps_nothing) {
  auto io = std::make_unique<asio::io_context>();
  masters_t masters;
  bool done = false;
  asio::co_spawn(*io, release_with_an_answer_owed(&masters, dlock::test::unique_name("owed"), &done),
                 [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  for (int i = 0; i < 100000 && !done; ++i) io->run_one_for(std::chrono::milliseconds(100));
  BOOST_REQUIRE(done);
  std::weak_ptr<redis::connection> owing = masters[2];
  masters.clear();
  io.reset();
  BOOST_TEST(owing.expired());
}

BOOST_AUTO_TEST_CASE(duplicate_masters_are_refused) {
  asio::io_context io;
  auto ex = io.get_executor();
  auto at = [&](std::string host, std::uint16_t port) {
    redis::options o;
    o.host = std::move(host);
    o.port = port;
    return std::make_shared<redis::connection>(ex, o);
  };
  auto a = at("127.0.0.1", 1), b = at("127.0.0.1", 2), c = at("127.0.0.1", 3);
  redis::redlock_options good;
  // The same connection twice, two connections to one address, and a name
  // and an address of the same host: each would count one master twice.
  for (const masters_t& masters : {masters_t{a, a, b}, masters_t{a, b, at("127.0.0.1", 1)},
                                   masters_t{a, b, c, at("localhost", 3), at("127.0.0.1", 4)},
                                   masters_t{at("LOCALHOST", 7), at("localhost", 7), a}})
    BOOST_CHECK(refused(io, masters, "k", good));
  BOOST_CHECK(redis::redlock(ex, masters_t{a, b, c}, "k", good).invalid_reason().empty());
  BOOST_CHECK(redis::redlock(ex, masters_t{a, b, at("127.0.0.2", 1)}, "k", good).invalid_reason().empty());
  io.run();
}

BOOST_AUTO_TEST_CASE(bad_input_is_rejected_before_anything_is_sent) {
  asio::io_context io;
  auto ex = io.get_executor();
  masters_t five;
  for (std::size_t i = 0; i < 5; ++i) {
    redis::options o;
    o.port = static_cast<std::uint16_t>(1 + i);  // never connected: nothing may be sent (distinct: no duplicates)
    five.push_back(std::make_shared<redis::connection>(ex, o));
  }
  redis::redlock_options good;
  BOOST_CHECK(refused(io, {}, "k", good));
  BOOST_CHECK(refused(io, five, "", good));
  auto bad = good;
  bad.ttl = 0ms;
  BOOST_CHECK(refused(io, five, "k", bad));
  bad.ttl = -100ms;
  BOOST_CHECK(refused(io, five, "k", bad));
  bad = good;
  bad.drift_factor = 1.5;
  BOOST_CHECK(refused(io, five, "k", bad));
  bad.drift_factor = -0.01;
  BOOST_CHECK(refused(io, five, "k", bad));
  masters_t with_null = five;
  with_null[2] = nullptr;
  BOOST_CHECK(refused(io, with_null, "k", good));
  BOOST_CHECK(redis::redlock(ex, five, "k", good).invalid_reason().empty());
  for (auto& c : five) BOOST_CHECK(c->stats().commands == 0);
  close_all(five);
  io.run();
}

BOOST_AUTO_TEST_SUITE_END()
