// Fencing on Redis: tokens that grow strictly from one hold to the next
// across competing clients (redis::lock and redis::redlock), writes that
// refuse a stale token (redis::fenced_set, fenced_eval), and a Redlock
// master without its counter never making a token go back.
#include "integration/redlock_support.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/fenced.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

using namespace redlock_test;

namespace {

constexpr int acquisitions = 1000;

// What the competing clients saw, in the order they held the lock: a
// holder records its token before it releases, so the records follow the holds.
struct fencing_log {
  std::vector<std::int64_t> tokens;
  int workers_done = 0;
  std::string failure;
};

template <class Lock>
asio::awaitable<void> compete(std::shared_ptr<Lock> lock, std::shared_ptr<fencing_log> log) {
  while (static_cast<int>(log->tokens.size()) < acquisitions && log->failure.empty()) {
    auto [ec] = co_await lock->acquire(tuple_token);
    if (ec == dlock::error::timed_out || ec == dlock::error::taken) continue;
    if (ec) {
      log->failure = "acquire: " + ec.message();
      break;
    }
    log->tokens.push_back(lock->fencing_token());
    auto [ec_r] = co_await lock->release(tuple_token);
    if (ec_r) log->failure = "release: " + ec_r.message();
    if (lock->fencing_token() != 0) log->failure = "a token after release";
  }
  ++log->workers_done;
}

template <class Lock>
asio::awaitable<void> wait_for_workers(std::vector<std::shared_ptr<Lock>> locks, std::shared_ptr<fencing_log> log) {
  auto ex = co_await asio::this_coro::executor;
  for (auto& lock : locks) asio::co_spawn(ex, compete(lock, log), asio::detached);
  while (log->workers_done < static_cast<int>(locks.size())) co_await sleep_for(10ms);
  BOOST_REQUIRE_MESSAGE(log->failure.empty(), log->failure);
  BOOST_REQUIRE_GE(log->tokens.size(), static_cast<std::size_t>(acquisitions));
}

void check_strictly_increasing(const std::vector<std::int64_t>& tokens) {
  std::size_t bad = 0;
  for (std::size_t i = 1; i < tokens.size(); ++i)
    if (tokens[i] <= tokens[i - 1]) ++bad;
  BOOST_CHECK_GT(tokens.front(), 0);
  BOOST_CHECK_MESSAGE(bad == 0, bad << " of " << tokens.size() << " tokens did not grow (first "
                                    << tokens.front() << ", last " << tokens.back() << ")");
}

redis::lock_options contended_lock_options() {
  redis::lock_options o;
  o.fencing = true;
  o.ttl = 10s;
  o.wait = 30s;
  o.retry_delay = 1ms;
  o.retry_jitter = 1ms;
  return o;
}

asio::awaitable<void> single_lock_tokens(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto key = dlock::test::unique_name("fenced-lock");
  std::vector<std::shared_ptr<redis::connection>> connections;
  std::vector<std::shared_ptr<redis::lock>> locks;
  for (int i = 0; i < 4; ++i) {
    auto more = co_await connect_masters(ex, 1);
    connections.push_back(more[0]);
    locks.push_back(std::make_shared<redis::lock>(*more[0], key, contended_lock_options()));
  }
  auto log = std::make_shared<fencing_log>();
  co_await wait_for_workers(locks, log);
  check_strictly_increasing(log->tokens);
  BOOST_CHECK_EQUAL(get_key(0, key + ":fencing"), std::to_string(log->tokens.back()));
  BOOST_CHECK_EQUAL(redis_cli(0, "EXISTS " + key), "0");
  locks.clear();
  for (auto& c : connections) c->close();
  close_all(masters);
}

// The fenced acquire is a MULTI block. When MULTI alone is refused (here an
// ACL without it), the SET runs on its own, outside any block, and only
// EXEC's error comes back: the attempt may have taken the key, so the lock
// deletes it by its token before failing. Without that cleanup the key would
// block the lock for its whole TTL, held by nobody.
asio::awaitable<void> refused_multi_leaves_no_key(asio::any_io_executor ex) {
  auto user = dlock::test::unique_name("no-multi");
  auto key = dlock::test::unique_name("fenced-no-multi");
  BOOST_REQUIRE_EQUAL(redis_cli(0, "ACL SETUSER " + user + " on '>secret' '~*' '+@all' '-multi'"), "OK");
  auto endpoint = dlock::test::redis_masters().at(0);
  redis::options o;
  o.host = endpoint.host;
  o.port = endpoint.port;
  o.username = user;
  o.password = "secret";
  auto restricted = std::make_shared<redis::connection>(ex, o);
  auto [connect_ec] = co_await restricted->connect(tuple_token);
  BOOST_REQUIRE_MESSAGE(!connect_ec, "connect: " + connect_ec.message());
  auto lock_options = contended_lock_options();
  lock_options.ttl = 60s;
  redis::lock lock(*restricted, key, lock_options);
  auto [ec] = co_await lock.try_acquire(tuple_token);
  BOOST_TEST(ec, "the acquire failed");
  BOOST_TEST_MESSAGE("acquire: " << ec.message());
  BOOST_TEST(!lock.held());
  BOOST_TEST(redis_cli(0, "GET " + key + ":fencing") == "1", "the INCR ran outside the block too");
  std::string exists = "1";
  for (int i = 0; i < 100 && exists != "0"; ++i) {  // the cleanup runs in the background
    exists = redis_cli(0, "EXISTS " + key);
    if (exists != "0") co_await sleep_for(20ms);
  }
  BOOST_TEST(exists == "0", "the key the lone SET took was left behind (TTL " << redis_cli(0, "PTTL " + key) << ")");
  restricted->close();
  redis_cli(0, "ACL DELUSER " + user);
  redis_cli(0, "DEL " + key + ":fencing");
}

// Issue #31, reproduction 4: `<key>:fencing` holds no integer (text, a
// list, a counter at INT64_MAX that INCR cannot raise, another lock named
// `<key>:fencing`): EXEC answers [OK, error] after its SET ran. The acquire
// fails with the server's error (it was "not valid RESP") and deletes its
// key at once (it was left for the whole ttl, so rivals got `taken`).
asio::awaitable<void> bad_counter_fails_and_leaves_no_key(asio::any_io_executor ex, std::string poison) {
  auto key = dlock::test::unique_name("fenced-bad-counter");
  auto counter = key + ":fencing";
  redis_cli(0, "DEL " + counter);
  redis_cli(0, poison.replace(poison.find("COUNTER"), 7, counter));
  auto masters = co_await connect_masters(ex, 1);
  auto lock_options = contended_lock_options();
  lock_options.ttl = 60s;
  redis::lock lock(*masters[0], key, lock_options);
  auto [ec] = co_await lock.try_acquire(tuple_token);
  BOOST_TEST_MESSAGE(poison << ": " << ec.message());
  BOOST_TEST(ec);
  BOOST_TEST((ec != redis::error::protocol_error), "a server error, not \"not valid RESP\"");
  BOOST_TEST((ec != dlock::error::taken));
  BOOST_TEST(!lock.held());
  std::string exists = "1";
  for (int i = 0; i < 100 && exists != "0"; ++i) {  // the cleanup runs in the background
    exists = redis_cli(0, "EXISTS " + key);
    if (exists != "0") co_await sleep_for(20ms);
  }
  BOOST_TEST(exists == "0", "the key was left behind (TTL " << redis_cli(0, "PTTL " + key) << ")");
  redis_cli(0, "DEL " + counter);
  close_all(masters);
}

asio::awaitable<void> text_counter(asio::any_io_executor ex) {
  return bad_counter_fails_and_leaves_no_key(ex, "SET COUNTER text");
}
asio::awaitable<void> list_counter(asio::any_io_executor ex) {
  return bad_counter_fails_and_leaves_no_key(ex, "RPUSH COUNTER a");
}
asio::awaitable<void> counter_at_int64_max(asio::any_io_executor ex) {
  return bad_counter_fails_and_leaves_no_key(ex, "SET COUNTER 9223372036854775807");
}

redis::redlock_options contended_redlock_options() {
  redis::redlock_options o;
  o.fencing = true;
  o.ttl = 10s;
  o.retry_count = -1;
  o.wait_limit = 30s;
  o.retry_delay = 1ms;
  o.retry_jitter = 1ms;
  return o;
}

asio::awaitable<void> redlock_tokens(asio::any_io_executor ex) {
  auto key = dlock::test::unique_name("fenced-redlock");
  std::vector<masters_t> fleets;
  std::vector<std::shared_ptr<redis::redlock>> locks;
  for (int i = 0; i < 3; ++i) {
    fleets.push_back(co_await connect_masters(ex));
    locks.push_back(std::make_shared<redis::redlock>(ex, fleets.back(), key, contended_redlock_options()));
  }
  auto log = std::make_shared<fencing_log>();
  co_await wait_for_workers(locks, log);
  check_strictly_increasing(log->tokens);
  locks.clear();
  for (auto& fleet : fleets) close_all(fleet);
}

// Without the option, no token and no counter.
asio::awaitable<void> unfenced_locks_have_no_token(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex);
  auto key = dlock::test::unique_name("unfenced");
  auto lock_options = contended_lock_options();
  lock_options.fencing = false;
  redis::lock single(*masters[0], key, lock_options);
  BOOST_REQUIRE(!std::get<0>(co_await single.acquire(tuple_token)));
  BOOST_CHECK_EQUAL(single.fencing_token(), 0);
  co_await single.release(tuple_token);
  auto redlock_options = contended_redlock_options();
  redlock_options.fencing = false;
  redis::redlock many(ex, masters, key, redlock_options);
  BOOST_REQUIRE(!std::get<0>(co_await many.acquire(tuple_token)));
  BOOST_CHECK_EQUAL(many.fencing_token(), 0);
  co_await many.release(tuple_token);
  for (std::size_t i = 0; i < 5; ++i) BOOST_CHECK_EQUAL(redis_cli(i, "EXISTS " + key + ":fencing"), "0");
  close_all(masters);
}

// The holder that paused past its validity, then writes: refused once the
// next holder has written.
asio::awaitable<void> paused_holder_is_refused(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto& conn = *masters[0];
  auto key = dlock::test::unique_name("fenced-resource-lock");
  auto resource = dlock::test::unique_name("fenced-resource");
  redis::lock_options o;
  o.fencing = true;
  o.ttl = 200ms;
  redis::lock a(conn, key, o), b(conn, key, o);
  BOOST_REQUIRE(!std::get<0>(co_await a.acquire(tuple_token)));
  auto token_a = a.fencing_token();
  BOOST_REQUIRE(!std::get<0>(co_await redis::fenced_set(conn, resource, "a1", token_a, tuple_token)));
  co_await sleep_for(400ms);  // "paused": the key expired meanwhile
  BOOST_REQUIRE(!std::get<0>(co_await b.acquire(tuple_token)));
  auto token_b = b.fencing_token();
  BOOST_CHECK_GT(token_b, token_a);
  auto [ec_b] = co_await redis::fenced_set(conn, resource, "b1", token_b, tuple_token);
  BOOST_CHECK_MESSAGE(!ec_b, ec_b.message());
  auto [ec_b2] = co_await redis::fenced_set(conn, resource, "b2", token_b, tuple_token);  // same holder again
  BOOST_CHECK_MESSAGE(!ec_b2, ec_b2.message());
  auto [ec_a] = co_await redis::fenced_set(conn, resource, "a2", token_a, tuple_token);
  BOOST_CHECK_MESSAGE(ec_a == dlock::error::stale_token, ec_a.message());
  BOOST_CHECK_EQUAL(get_key(0, resource), "b2");
  BOOST_CHECK_EQUAL(get_key(0, resource + ":fenced_by"), std::to_string(token_b));
  // Bad input: at once, nothing sent.
  auto [ec_zero] = co_await redis::fenced_set(conn, resource, "x", 0, tuple_token);
  BOOST_CHECK(ec_zero == dlock::error::invalid_argument);
  auto [ec_key] = co_await redis::fenced_set(conn, "", "x", token_b, tuple_token);
  BOOST_CHECK(ec_key == dlock::error::invalid_argument);
  BOOST_CHECK_EQUAL(get_key(0, resource), "b2");
  co_await a.release(tuple_token);
  co_await b.release(tuple_token);
  close_all(masters);
}

asio::awaitable<void> fenced_eval_runs_only_for_a_current_token(asio::any_io_executor ex) {
  auto masters = co_await connect_masters(ex, 1);
  auto& conn = *masters[0];
  auto fence = dlock::test::unique_name("fence");
  auto counter = dlock::test::unique_name("fenced-counter");
  auto add = redis::fenced_script("return redis.call('incrby', KEYS[1], ARGV[1])");
  // Named vectors: g++ 12 cannot keep an initializer list in a coroutine frame.
  std::vector<std::string> keys{counter}, ten{"10"}, one{"1"}, hundred{"100"};
  auto [ec1, r1] = co_await redis::fenced_eval(conn, add, fence, 5, keys, ten, tuple_token);
  BOOST_CHECK_MESSAGE(!ec1, ec1.message());
  BOOST_CHECK_EQUAL(r1.integer(), 10);
  auto [ec2, r2] = co_await redis::fenced_eval(conn, add, fence, 7, keys, one, tuple_token);
  BOOST_CHECK_EQUAL(r2.integer(), 11);
  auto [ec3, r3] = co_await redis::fenced_eval(conn, add, fence, 6, keys, hundred, tuple_token);
  BOOST_CHECK_MESSAGE(ec3 == dlock::error::stale_token, ec3.message());
  BOOST_CHECK_EQUAL(get_key(0, counter), "11");  // the body did not run
  BOOST_CHECK_EQUAL(get_key(0, fence), "7");
  auto [ec4, r4] = co_await redis::fenced_eval(conn, add, "", 9, keys, one, tuple_token);
  BOOST_CHECK(ec4 == dlock::error::invalid_argument);
  close_all(masters);
}

// Masters 0-2 held the last token (10) and 3-4 lag behind (3); master 2 then
// lost its data. With 0 and 1 unreachable, the masters that answer have two
// counters, not a majority: a token from them (4) would go back, so the
// acquire fails. With every master back the token is 11 and master 2 is
// re-seeded.
asio::awaitable<void> redlock_master_without_its_counter(asio::any_io_executor ex) {
  auto key = dlock::test::unique_name("fenced-reseed");
  auto counter = key + ":fencing";
  for (std::size_t i = 0; i < 5; ++i) redis_cli(i, "SET " + counter + (i < 3 ? " 10" : " 3"));
  redis_cli(2, "DEL " + counter);
  auto masters = co_await connect_masters(ex);
  masters[0]->close();
  masters[1]->close();
  auto o = contended_redlock_options();
  o.retry_count = 2;
  o.wait_limit = 0ms;
  {
    redis::redlock cut_off(ex, masters, key, o);
    auto [ec] = co_await cut_off.acquire(tuple_token);
    BOOST_CHECK_MESSAGE(ec == dlock::error::no_quorum, ec.message() + " " + cut_off.last_outcomes());
    BOOST_CHECK_EQUAL(cut_off.fencing_token(), 0);
  }
  for (std::size_t i = 2; i < 5; ++i) {
    bool gone = co_await key_gone_eventually(i, key);
    BOOST_CHECK_MESSAGE(gone, "key left on master " << i);
  }
  BOOST_CHECK_EQUAL(get_key(2, counter), "");  // not created by a round that did not fence
  auto all = co_await connect_masters(ex);
  redis::redlock back(ex, all, key, o);
  auto [ec] = co_await back.acquire(tuple_token);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message() + " " + back.last_outcomes());
  BOOST_CHECK_EQUAL(back.fencing_token(), 11);
  for (std::size_t i = 0; i < 5; ++i) {
    // The write-back reaches the masters beyond the majority in the background.
    std::string value;
    for (int tries = 0; tries < 100 && value != "11"; ++tries) {
      value = get_key(i, counter);
      if (value != "11") co_await sleep_for(20ms);
    }
    BOOST_CHECK_MESSAGE(value == "11", "master " << i << " counter " << value);
  }
  co_await back.release(tuple_token);
  close_all(masters);
  close_all(all);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_fencing)

BOOST_AUTO_TEST_CASE(lock_tokens_strictly_increase_across_competing_clients) { run(single_lock_tokens); }
BOOST_AUTO_TEST_CASE(redlock_tokens_strictly_increase_across_competing_clients) { run(redlock_tokens); }
BOOST_AUTO_TEST_CASE(without_fencing_there_is_no_token_and_no_counter) { run(unfenced_locks_have_no_token); }
BOOST_AUTO_TEST_CASE(a_paused_holder_is_refused_by_fenced_set) { run(paused_holder_is_refused); }
BOOST_AUTO_TEST_CASE(a_fenced_acquire_whose_multi_is_refused_leaves_no_key) { run(refused_multi_leaves_no_key); }
BOOST_AUTO_TEST_CASE(a_fenced_acquire_over_a_text_counter_fails_and_leaves_no_key) { run(text_counter); }
BOOST_AUTO_TEST_CASE(a_fenced_acquire_over_a_list_counter_fails_and_leaves_no_key) { run(list_counter); }
BOOST_AUTO_TEST_CASE(a_fenced_acquire_over_a_counter_at_int64_max_fails_and_leaves_no_key) {
  run(counter_at_int64_max);
}
BOOST_AUTO_TEST_CASE(fenced_eval_runs_its_body_only_for_a_current_token) {
  run(fenced_eval_runs_only_for_a_current_token);
}
BOOST_AUTO_TEST_CASE(a_redlock_token_never_goes_back_past_a_master_without_its_counter) {
  run(redlock_master_without_its_counter);
}

BOOST_AUTO_TEST_SUITE_END()
