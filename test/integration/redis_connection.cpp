// dlock::redis::connection against a real redis-server: replies, pipelining,
// AUTH / SELECT / SETNAME, binary safety, scripts, cancellation, timeouts.
#include "redis_support.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/lock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using dlock::error_code;
using redis_test::master_options;
using redis_test::run;

namespace {

constexpr auto tuple_token = asio::as_tuple(asio::deferred);

// Variadic, not a braced list: g++ 12 miscompiles braced lists in co_await expressions.
template <class... Args>
asio::awaitable<std::tuple<error_code, redis::reply>> attempt(redis::connection& c, Args... args) {
  auto op = c.exec(redis::command(args...), tuple_token);
  co_return co_await std::move(op);
}

template <class... Args>
asio::awaitable<redis::reply> must(redis::connection& c, Args... args) {
  auto op = c.exec(redis::command(args...), tuple_token);
  auto [ec, r] = co_await std::move(op);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message() + ": " + std::string(r.string()));
  co_return r;
}

asio::awaitable<void> reply_kinds(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  BOOST_CHECK(c.state() == redis::connection_state::connected);
  auto key = dlock::test::unique_name("kinds");
  auto r = co_await must(c, "SET", key, "v");
  BOOST_CHECK(r.is_ok());
  r = co_await must(c, "GET", key);
  BOOST_CHECK(r.is_bulk());
  BOOST_CHECK_EQUAL(r.string(), "v");
  r = co_await must(c, "GET", key + "-missing");
  BOOST_CHECK(r.is_nil());
  r = co_await must(c, "INCRBY", key + "-n", "41");
  BOOST_CHECK(r.is_integer());
  BOOST_CHECK_EQUAL(r.integer(), 41);
  r = co_await must(c, "RPUSH", key + "-l", "a", "b", "c");
  r = co_await must(c, "LRANGE", key + "-l", "0", "-1");
  BOOST_REQUIRE(r.is_array());
  BOOST_REQUIRE_EQUAL(r.elements().size(), 3u);
  BOOST_CHECK_EQUAL(r.elements()[2].string(), "c");
  r = co_await must(c, "PING");
  BOOST_CHECK(r.is_status());
  BOOST_CHECK_EQUAL(r.string(), "PONG");

  // An error reply: an error_code plus the server's message; the stream goes on.
  auto [ec, err] = co_await attempt(c, "LPUSH", key, "x");
  BOOST_CHECK(ec == redis::error::wrong_type);
  BOOST_CHECK(err.is_error());
  BOOST_CHECK(err.string().find("WRONGTYPE") == 0);
  auto [ec2, bad] = co_await attempt(c, "NOSUCHCOMMAND");
  BOOST_CHECK(ec2 == redis::error::server_error);
  BOOST_CHECK(bad.string().find("unknown command") != std::string::npos);
  r = co_await must(c, "GET", key);
  BOOST_CHECK_EQUAL(r.string(), "v");
  co_await must(c, "DEL", key, key + "-n", key + "-l");
  // exec with a vector of strings.
  std::vector<std::string> echo_args{"ECHO", "hi"};
  auto echo_op = c.exec(echo_args, tuple_token);
  auto [ec3, echoed] = co_await std::move(echo_op);
  BOOST_CHECK(!ec3);
  BOOST_CHECK_EQUAL(echoed.string(), "hi");
}

// 1,000 coroutines x 100 commands each, all at once on one connection.
asio::awaitable<void> counting_client(redis::connection& c, std::string key, int commands,
                                      std::shared_ptr<int> failures) {
  for (int i = 0; i < commands; ++i) {
    auto op = c.exec(redis::command("INCR", key), tuple_token);
    auto [ec, r] = co_await std::move(op);
    if (ec || !r.is_integer() || r.integer() != i + 1) ++*failures;
  }
}

asio::awaitable<void> many_coroutines(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto prefix = dlock::test::unique_name("many");
  constexpr int clients = 1000, per_client = 100;
  auto failures = std::make_shared<int>(0);
  auto done = std::make_shared<int>(0);
  auto before = c.stats();
  asio::steady_timer all_done(ex, asio::steady_timer::time_point::max());
  for (int i = 0; i < clients; ++i)
    asio::co_spawn(ex, counting_client(c, prefix + "-" + std::to_string(i), per_client, failures),
                   [done, &all_done](std::exception_ptr) {
                     if (++*done == clients) all_done.cancel();
                   });
  co_await all_done.async_wait(tuple_token);
  auto after = c.stats();
  BOOST_CHECK_EQUAL(*failures, 0);
  std::uint64_t commands = after.commands - before.commands;
  std::uint64_t writes = after.writes - before.writes;
  BOOST_TEST_MESSAGE("100,000 commands from 1,000 coroutines: " << commands << " commands in "
                                                                << writes << " writes");
  BOOST_CHECK_EQUAL(commands, std::uint64_t(clients * per_client));
  BOOST_CHECK_LT(writes * 20, commands);  // under 5% of the commands
  for (int i = 0; i < clients; i += 100) {
    auto r = co_await must(c, "GET", prefix + "-" + std::to_string(i));
    BOOST_CHECK_EQUAL(r.string(), std::to_string(per_client));
  }
}

// Commands issued in one go complete in the order issued, each with its own reply.
asio::awaitable<void> completion_order(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  constexpr int n = 2000;
  auto order = std::make_shared<std::vector<int>>();
  auto mismatches = std::make_shared<int>(0);
  asio::steady_timer all_done(ex, asio::steady_timer::time_point::max());
  for (int i = 0; i < n; ++i)
    c.exec({"ECHO", std::to_string(i)}, [i, order, mismatches, &all_done](error_code ec, redis::reply r) {
      if (ec || r.string() != std::to_string(i)) ++*mismatches;
      order->push_back(i);
      if (order->size() == n) all_done.cancel();
    });
  co_await all_done.async_wait(tuple_token);
  BOOST_CHECK_EQUAL(*mismatches, 0);
  bool in_order = true;
  for (int i = 0; i < n; ++i) in_order = in_order && (*order)[std::size_t(i)] == i;
  BOOST_CHECK(in_order);
}

asio::awaitable<void> binary_safe(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  std::string key = dlock::test::unique_name("bin");
  key += std::string("\0\r\n$3\r\n*1", 10);
  std::string value;
  for (int i = 0; i < 256; ++i) value += static_cast<char>(i);
  value += "\r\n\r\n";
  co_await must(c, "SET", key, value);
  auto r = co_await must(c, "GET", key);
  BOOST_CHECK(r.is_bulk());
  BOOST_CHECK(r.string() == value);
  r = co_await must(c, "STRLEN", key);
  BOOST_CHECK_EQUAL(r.integer(), std::int64_t(value.size()));
  r = co_await must(c, "DEL", key);
  BOOST_CHECK_EQUAL(r.integer(), 1);
}

asio::awaitable<void> select_and_client_name(asio::any_io_executor ex) {
  auto o = master_options();
  o.database = 3;
  o.client_name = "dlock-test-client";
  redis::connection db3(ex, o);
  redis::connection db0(ex, master_options());
  co_await db3.connect();
  co_await db0.connect();
  auto key = dlock::test::unique_name("select");
  co_await must(db3, "SET", key, "in-3");
  auto r = co_await must(db0, "GET", key);
  BOOST_CHECK(r.is_nil());
  r = co_await must(db3, "GET", key);
  BOOST_CHECK_EQUAL(r.string(), "in-3");
  r = co_await must(db3, "CLIENT", "GETNAME");
  BOOST_CHECK_EQUAL(r.string(), "dlock-test-client");
  co_await must(db3, "DEL", key);
}

asio::awaitable<void> acl_user(asio::any_io_executor ex) {
  redis::connection admin(ex, master_options());
  co_await admin.connect();
  auto user = dlock::test::unique_name("dlock-user");
  co_await must(admin, "ACL", "SETUSER", user, "on", ">s3cret pass", "~*", "+@all");
  struct cleanup {  // delete the user whatever happens below
    redis::connection& admin;
    std::string user;
    ~cleanup() { admin.exec({"ACL", "DELUSER", user}, asio::detached); }
  } guard{admin, user};

  auto good = master_options();
  good.username = user;
  good.password = "s3cret pass";
  redis::connection c(ex, good);
  auto [ec] = co_await c.connect(tuple_token);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  auto r = co_await must(c, "ACL", "WHOAMI");
  BOOST_CHECK_EQUAL(r.string(), user);
  c.close();

  auto bad = good;
  bad.password = "wrong";
  bad.reconnect = false;
  redis::connection wrong(ex, bad);
  auto [ec2] = co_await wrong.connect(tuple_token);
  BOOST_CHECK(ec2 == redis::error::auth_failed);
  BOOST_TEST_MESSAGE("wrong password: " << ec2.message());
  auto [ec3, r3] = co_await attempt(wrong, "PING");
  BOOST_CHECK(ec3);
  co_await must(admin, "ACL", "DELUSER", user);
}

asio::awaitable<void> script_fallback(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  // A script body unique to this run, so its cache state is known.
  redis::script s("return {KEYS[1], ARGV[1], '" + dlock::test::unique_name("s") + "'}");
  co_await must(c, "SCRIPT", "FLUSH");
  auto exists = co_await must(c, "SCRIPT", "EXISTS", s.sha1());
  BOOST_CHECK_EQUAL(exists.elements().at(0).integer(), 0);
  auto first_op = c.eval(s, {"k1"}, {"a1"}, tuple_token);
  auto [ec, r] = co_await std::move(first_op);  // its first use on this connection: EVAL
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  BOOST_REQUIRE(r.is_array());
  BOOST_CHECK_EQUAL(r.elements().at(0).string(), "k1");
  BOOST_CHECK_EQUAL(r.elements().at(1).string(), "a1");
  exists = co_await must(c, "SCRIPT", "EXISTS", s.sha1());
  BOOST_CHECK_EQUAL(exists.elements().at(0).integer(), 1);  // our local sha1 is the server's
  std::vector<std::string> keys{"k2"}, args{"a2"};
  auto second_op = c.eval(s, keys, args, tuple_token);
  auto [ec2, r2] = co_await std::move(second_op);  // EVALSHA hits
  BOOST_CHECK(!ec2);
  BOOST_CHECK_EQUAL(r2.elements().at(1).string(), "a2");
  // A script error is a server error with the message.
  redis::script broken("return redis.call('NOSUCH')");
  auto broken_op = c.eval(broken, {}, {}, tuple_token);
  auto [ec3, r3] = co_await std::move(broken_op);
  BOOST_CHECK(ec3 == redis::error::server_error);
  BOOST_CHECK(!r3.string().empty());
}

asio::awaitable<void> cancelled_command_keeps_stream_in_sync(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("blocked");
  for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
    asio::cancellation_signal signal;
    error_code cancelled_ec;
    bool cancelled_done = false;
    c.exec({"BLPOP", key, "0.3"},
           asio::bind_cancellation_slot(signal.slot(), [&](error_code ec, redis::reply) {
             cancelled_ec = ec;
             cancelled_done = true;
           }));
    auto [ping_ec, pong] = co_await attempt(c, "ECHO", "queued-behind");
    (void)ping_ec;  // answered after the BLPOP times out on the server
    BOOST_CHECK_EQUAL(pong.string(), "queued-behind");
    BOOST_CHECK(cancelled_done);

    // Now cancel while the reply is outstanding; the late reply is dropped.
    cancelled_done = false;
    c.exec({"BLPOP", key, "0.3"},
           asio::bind_cancellation_slot(signal.slot(), [&](error_code ec, redis::reply) {
             cancelled_ec = ec;
             cancelled_done = true;
           }));
    asio::steady_timer t(ex, std::chrono::milliseconds(50));
    co_await t.async_wait(tuple_token);
    signal.emit(type);
    co_await t.async_wait(tuple_token);  // let the completion run
    BOOST_CHECK(cancelled_done);
    BOOST_CHECK(cancelled_ec == asio::error::operation_aborted);
    auto r = co_await must(c, "ECHO", "after");
    BOOST_CHECK_EQUAL(r.string(), "after");
  }
  // Cancelled before it is written: never sent.
  co_await must(c, "SET", key + "-x", "0");
  asio::cancellation_signal signal;
  bool done = false;
  // The BLPOP is written at once; the INCR issued during that write waits for the next one.
  bool blocker_done = false;
  c.exec({"BLPOP", key, "0.2"}, [&](error_code, redis::reply) { blocker_done = true; });
  c.exec({"INCR", key + "-x"}, asio::bind_cancellation_slot(signal.slot(), [&](error_code ec, redis::reply) {
           BOOST_CHECK(ec == asio::error::operation_aborted);
           done = true;
         }));
  signal.emit(asio::cancellation_type::terminal);
  auto r = co_await must(c, "GET", key + "-x");  // answered after the BLPOP
  BOOST_CHECK(blocker_done);
  BOOST_CHECK(done);
  BOOST_CHECK_EQUAL(r.string(), "0");  // "1" would mean: it was sent
  co_await must(c, "DEL", key + "-x");
}

// Issued without awaiting: the handler records the outcome.
struct outcome {
  bool done = false;
  error_code ec;
  redis::reply value;
};
using outcome_ptr = std::shared_ptr<outcome>;

outcome_ptr issue(redis::connection& c, redis::command cmd) {
  auto o = std::make_shared<outcome>();
  c.exec(std::move(cmd), [o](error_code ec, redis::reply r) {
    o->done = true;
    o->ec = ec;
    o->value = std::move(r);
  });
  return o;
}

asio::awaitable<void> command_timeout(asio::any_io_executor ex) {
  auto o = master_options();
  o.command_timeout = std::chrono::milliseconds(200);
  redis::connection c(ex, o);
  co_await c.connect();
  auto key = dlock::test::unique_name("timeout");
  // A slow server, not a silent one: a 100 ms script is answered in time;
  // a 500 ms one, sent in a later write, times out while that answer comes
  // in. Its late reply is dropped; the next reply is the right one, on the
  // same connection. (Redis sends replies only after it has run everything
  // one read brought, hence the two writes.) Valkey 8's TIME stands still
  // inside a script; its os.clock() (the CPU time of a busy loop) does not.
  // Redis 7.0 has no `os`: TIME there.
  const char* busy =
      "local has_clock = pcall(function() return os.clock() end) "
      "local function now() if has_clock then return os.clock() * 1000000 end "
      "local t = redis.call('TIME') return t[1] * 1000000 + t[2] end "
      "local start = now() repeat until now() - start >= ARGV[1] * 1000 return 1";
  auto quick = issue(c, redis::command("EVAL", busy, "0", "100"));
  asio::steady_timer t(ex, std::chrono::milliseconds(20));
  co_await t.async_wait(tuple_token);
  auto slow = issue(c, redis::command("EVAL", busy, "0", "500"));
  t.expires_after(std::chrono::milliseconds(900));  // both scripts have run
  co_await t.async_wait(tuple_token);
  BOOST_CHECK(quick->done && !quick->ec);
  BOOST_CHECK(slow->ec == redis::error::timed_out);
  auto echo = co_await must(c, "ECHO", "in sync");
  BOOST_CHECK_EQUAL(echo.string(), "in sync");
  BOOST_CHECK_EQUAL(c.stats().connects, 1u);

  // A silent server (here one blocked on our own BLPOP): nothing read since
  // the command was issued, so the connection resets and reconnects.
  auto [ec, r] = co_await attempt(c, "BLPOP", key, "0.5");
  BOOST_CHECK(ec == redis::error::timed_out);
  t.expires_after(std::chrono::milliseconds(20));
  co_await t.async_wait(tuple_token);
  auto [up_ec] = co_await c.wait_for(redis::connection_state::connected, tuple_token);
  BOOST_CHECK(!up_ec);
  echo = co_await must(c, "ECHO", "fresh connection");
  BOOST_CHECK_EQUAL(echo.string(), "fresh connection");
  BOOST_CHECK_EQUAL(c.stats().connects, 2u);
}

asio::awaitable<void> refusals(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  auto [ec, r] = co_await attempt(c, "PING");
  BOOST_CHECK(ec == redis::error::not_connected);
  co_await c.connect();
  c.close();
  auto [ec2, r2] = co_await attempt(c, "PING");
  BOOST_CHECK(ec2 == dlock::error::closed);
  BOOST_CHECK(c.state() == redis::connection_state::closed);

  auto o = master_options();
  o.port = 1;  // nothing listens there
  o.reconnect = false;
  redis::connection nowhere(ex, o);
  auto [ec3] = co_await nowhere.connect(tuple_token);
  BOOST_CHECK(ec3);
  auto [ec4] = co_await nowhere.wait_for(redis::connection_state::closed, tuple_token);
  BOOST_CHECK(!ec4);
}


// ---- one reply per command, always (safety review F2, F4, F12c) ----

asio::awaitable<void> settle(asio::any_io_executor ex, std::chrono::milliseconds d) {
  asio::steady_timer t(ex, d);
  co_await t.async_wait(tuple_token);
}

// Redis answers these with no reply, several, or a stream, or they change
// the protocol or the connection's greeting: pipelined with other commands,
// every later reply would go to the wrong caller. Refused before sending.
asio::awaitable<void> commands_without_one_reply_are_refused(asio::any_io_executor ex) {
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("refused");
  std::vector<redis::command> refused;
  refused.emplace_back();  // "*0": Redis skips it without a reply
  refused.emplace_back(std::vector<std::string>{});
  refused.emplace_back("SUBSCRIBE", key, key + "-2");
  refused.emplace_back("psubscribe", key + "*");
  refused.emplace_back("SSUBSCRIBE", key);
  refused.emplace_back("UNSUBSCRIBE");
  refused.emplace_back("PUNSUBSCRIBE", key);
  refused.emplace_back("SUNSUBSCRIBE");
  refused.emplace_back("MONITOR");
  refused.emplace_back("CLIENT", "REPLY", "OFF");
  refused.emplace_back("client", "reply", "skip");
  refused.emplace_back("CLIENT", "REPLY", "ON");
  refused.emplace_back("HELLO", "3");
  refused.emplace_back("RESET");
  refused.emplace_back("SYNC");
  refused.emplace_back("PSYNC", "?", "-1");
  refused.emplace_back("REPLCONF", "ACK", "0");
  refused.emplace_back("MULTI");
  auto before = c.stats();
  std::vector<outcome_ptr> outcomes;
  for (auto& cmd : refused) outcomes.push_back(issue(c, cmd));
  auto tail = issue(c, redis::command("ECHO", "after the refused ones"));
  co_await settle(ex, std::chrono::milliseconds(100));
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    BOOST_TEST_CONTEXT("refused command #" << i) {
      BOOST_CHECK(outcomes[i]->done);
      BOOST_CHECK_MESSAGE(outcomes[i]->ec == dlock::error::invalid_argument, outcomes[i]->ec.message());
    }
  }
  BOOST_CHECK(tail->done && !tail->ec);
  BOOST_CHECK_EQUAL(tail->value.string(), "after the refused ones");
  BOOST_CHECK_EQUAL(c.stats().commands - before.commands, 1u);  // nothing but the ECHO was sent
  // Their harmless kin still go through: one reply each.
  auto hello = co_await must(c, "HELLO", "2");
  BOOST_CHECK(hello.is_array());
  auto id = co_await must(c, "CLIENT", "ID");
  BOOST_CHECK(id.is_integer());
  auto r = co_await must(c, "ECHO", "in sync");
  BOOST_CHECK_EQUAL(r.string(), "in sync");
  BOOST_CHECK_EQUAL(c.stats().connects, 1u);
}

// The review's F4 reproduction: an empty command issued in the same tick as
// a lock's SET NX (on a key another client holds) and another command used
// to take the SET's reply, so the lock got the next command's "OK".
asio::awaitable<void> empty_command_cannot_hand_a_lock_someone_elses_key(asio::any_io_executor ex) {
  redis::connection other(ex, master_options());
  redis::connection c(ex, master_options());
  co_await other.connect();
  co_await c.connect();
  auto key = dlock::test::unique_name("shifted");
  co_await must(other, "SET", key, "held-by-someone-else", "PX", "60000");
  redis::lock l(c, key);
  auto empty = issue(c, redis::command());
  auto acquired = std::make_shared<outcome>();
  l.try_acquire([acquired](error_code ec) {
    acquired->done = true;
    acquired->ec = ec;
  });
  auto set = issue(c, redis::command("SET", key + "-o", "v"));
  co_await settle(ex, std::chrono::milliseconds(200));
  BOOST_CHECK(acquired->done);
  BOOST_CHECK_MESSAGE(acquired->ec == dlock::error::taken, "try_acquire: " + acquired->ec.message());
  BOOST_CHECK(!l.held());
  BOOST_CHECK(empty->ec == dlock::error::invalid_argument);
  BOOST_CHECK(set->done && !set->ec && set->value.is_ok());
  auto holder = co_await must(other, "GET", key);
  BOOST_CHECK_EQUAL(holder.string(), "held-by-someone-else");
  co_await must(other, "DEL", key, key + "-o");
}

// The review's F2 at connection level: a compare-and-delete script issued
// right before a SET of the same key and token. The SET must run after it,
// even when the server's script cache was flushed (once NOSCRIPT made the
// script's EVAL go out after the SET, which it then deleted).
asio::awaitable<void> script_never_runs_after_commands_issued_later(asio::any_io_executor ex) {
  redis::connection side(ex, master_options());
  co_await side.connect();
  redis::script compare_and_delete(
      "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0 -- " +
      dlock::test::unique_name("cad"));
  for (bool warm : {false, true}) {
    BOOST_TEST_CONTEXT((warm ? "the script ran on this connection before" : "a cold connection")) {
      redis::connection c(ex, master_options());
      co_await c.connect();
      auto key = dlock::test::unique_name("noscript");
      if (warm) {
        auto warming = c.eval(compare_and_delete, {key}, {"nobody"}, tuple_token);
        auto [warm_ec, warm_r] = co_await std::move(warming);
        BOOST_REQUIRE_MESSAGE(!warm_ec, warm_ec.message());
      }
      co_await must(side, "SCRIPT", "FLUSH");
      auto script_done = std::make_shared<outcome>();
      c.eval(compare_and_delete, {key}, {"T"}, [script_done](error_code ec, redis::reply r) {
        script_done->done = true;
        script_done->ec = ec;
        script_done->value = std::move(r);
      });
      auto set = issue(c, redis::command("SET", key, "T"));
      auto after = co_await must(c, "ECHO", "after both");  // replies come in order: both are done
      BOOST_CHECK_EQUAL(after.string(), "after both");
      co_await settle(ex, std::chrono::milliseconds(50));  // a posted completion, or the old delayed EVAL
      BOOST_CHECK(set->done && !set->ec);
      BOOST_CHECK(script_done->done);
      auto value = co_await must(side, "GET", key);
      BOOST_CHECK_MESSAGE(value.is_bulk() && value.string() == "T",
                          "the SET issued after the script was undone by it");
      if (warm) {
        // Its EVALSHA met the flushed cache with the SET already sent behind it: not run, and said so.
        BOOST_CHECK_MESSAGE(script_done->ec == redis::error::script_not_run, script_done->ec.message());
      } else {
        // Its first use on this connection went as EVAL: it ran, before the SET.
        BOOST_CHECK_MESSAGE(!script_done->ec, script_done->ec.message());
        BOOST_CHECK(script_done->value.is_integer() && script_done->value.integer() == 0);
      }
      // Issued again, alone: EVAL (the connection forgot what it had loaded).
      auto again = c.eval(compare_and_delete, {key}, {"T"}, tuple_token);
      auto [again_ec, again_r] = co_await std::move(again);
      BOOST_CHECK_MESSAGE(!again_ec, again_ec.message());
      BOOST_CHECK(again_r.is_integer() && again_r.integer() == 1);
      co_await must(side, "DEL", key);
    }
  }
  // An EVALSHA with nothing written after it meets a flushed cache: sent
  // again as EVAL in place, no error.
  redis::connection c(ex, master_options());
  co_await c.connect();
  auto warming = c.eval(compare_and_delete, {"k"}, {"nobody"}, tuple_token);
  auto [warm_ec, warm_r] = co_await std::move(warming);
  BOOST_REQUIRE(!warm_ec);
  co_await must(side, "SCRIPT", "FLUSH");
  auto alone = c.eval(compare_and_delete, {"k"}, {"nobody"}, tuple_token);
  auto [alone_ec, alone_r] = co_await std::move(alone);
  BOOST_CHECK_MESSAGE(!alone_ec, alone_ec.message());
  BOOST_CHECK(alone_r.is_integer() && alone_r.integer() == 0);
  auto loaded = co_await must(c, "SCRIPT", "EXISTS", compare_and_delete.sha1());
  BOOST_CHECK_EQUAL(loaded.elements().at(0).integer(), 1);
}

// A TCP relay in front of the real server, on the test's own executor, that
// can add bytes the server never sent: what a broken server or a middlebox
// could put on the wire.
class injecting_relay {
 public:
  using tcp = asio::ip::tcp;
  explicit injecting_relay(asio::any_io_executor ex)
      : s_(std::make_shared<state>(ex)) {
    asio::co_spawn(ex, accept_loop(s_), asio::detached);
  }
  ~injecting_relay() { s_->stop(); }
  std::uint16_t port() const { return s_->acceptor.local_endpoint().port(); }
  /// Writes `bytes` to the newest client connection, as if the server sent them.
  asio::awaitable<void> inject(std::string bytes) {
    auto client = s_->clients.back();
    co_await asio::async_write(*client, asio::buffer(bytes), tuple_token);
  }

 private:
  using socket_ptr = std::shared_ptr<tcp::socket>;
  struct state {
    explicit state(asio::any_io_executor ex) : acceptor(ex, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {}
    void stop() {
      error_code ignored;
      acceptor.close(ignored);
      for (auto& s : clients) s->close(ignored);
      for (auto& s : upstreams) s->close(ignored);
    }
    tcp::acceptor acceptor;
    std::vector<socket_ptr> clients, upstreams;
  };
  static asio::awaitable<void> accept_loop(std::shared_ptr<state> s) {
    auto server = master_options();
    for (;;) {
      auto [ec, accepted] = co_await s->acceptor.async_accept(tuple_token);
      if (ec) co_return;
      auto client = std::make_shared<tcp::socket>(std::move(accepted));
      auto upstream = std::make_shared<tcp::socket>(s->acceptor.get_executor());
      auto [connect_ec] = co_await upstream->async_connect(
          tcp::endpoint(asio::ip::make_address(server.host), server.port), tuple_token);
      if (connect_ec) co_return;
      s->clients.push_back(client);
      s->upstreams.push_back(upstream);
      asio::co_spawn(s->acceptor.get_executor(), pump(upstream, client), asio::detached);
      asio::co_spawn(s->acceptor.get_executor(), pump(client, upstream), asio::detached);
    }
  }
  static asio::awaitable<void> pump(socket_ptr from, socket_ptr to) {
    std::array<char, 16384> buffer;
    for (;;) {
      auto [ec, n] = co_await from->async_read_some(asio::buffer(buffer), tuple_token);
      if (ec) break;
      auto [write_ec, written] = co_await asio::async_write(*to, asio::buffer(buffer, n), tuple_token);
      if (write_ec) break;
    }
    error_code ignored;
    from->close(ignored);
    to->close(ignored);
  }
  std::shared_ptr<state> s_;
};

// Bytes that are not RESP2 (here a RESP3 push frame) while a command waits
// for its reply: the connection resets, and the command, which may have run,
// fails with connection_lost, the error that says "outcome unknown".
asio::awaitable<void> unexpected_bytes_reset_the_connection(asio::any_io_executor ex) {
  injecting_relay relay(ex);
  auto o = master_options();
  o.port = relay.port();
  o.reconnect_min = std::chrono::milliseconds(10);
  redis::connection c(ex, o);
  co_await c.connect();
  auto key = dlock::test::unique_name("garbage");
  auto blocked = issue(c, redis::command("BLPOP", key, "5"));
  auto behind = issue(c, redis::command("SET", key + "-behind", "v"));
  co_await settle(ex, std::chrono::milliseconds(50));  // both written, the BLPOP blocks
  BOOST_CHECK(!blocked->done);
  co_await relay.inject(">2\r\n$7\r\nmessage\r\n$1\r\nx\r\n");
  co_await settle(ex, std::chrono::milliseconds(50));
  BOOST_CHECK(blocked->done);
  BOOST_CHECK_MESSAGE(blocked->ec == redis::error::connection_lost, blocked->ec.message());
  BOOST_CHECK(behind->done);
  BOOST_CHECK_MESSAGE(behind->ec == redis::error::connection_lost, behind->ec.message());

  // A well-formed reply nobody asked for: the same reset, never a mismatch.
  auto [ready_ec] = co_await c.wait_for(redis::connection_state::connected, tuple_token);
  BOOST_REQUIRE(!ready_ec);
  auto connects = c.stats().connects;
  auto r = co_await must(c, "ECHO", "before");
  BOOST_CHECK_EQUAL(r.string(), "before");
  co_await relay.inject("+OK\r\n");
  co_await settle(ex, std::chrono::milliseconds(50));
  auto [again_ec] = co_await c.wait_for(redis::connection_state::connected, tuple_token);
  BOOST_REQUIRE(!again_ec);
  BOOST_CHECK_EQUAL(c.stats().connects, connects + 1);
  r = co_await must(c, "ECHO", "after");
  BOOST_CHECK_EQUAL(r.string(), "after");
  co_await must(c, "DEL", key + "-behind");
}

std::size_t threads_of_this_process() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// Asio's resolver works on a thread of its own. A connection to an address
// must not start it (dlock adds no threads, and a second thread makes every
// shared_ptr count in the process atomic); a host name still resolves.
asio::awaitable<void> an_address_starts_no_resolver_thread(asio::any_io_executor ex) {
  auto o = master_options();
  error_code not_an_address;
  asio::ip::make_address(o.host, not_an_address);
  if (not_an_address) {
    BOOST_TEST_MESSAGE("DLOCK_REDIS_MASTERS names a host, not an address: nothing to check");
    co_return;
  }
  auto before = threads_of_this_process();
  redis::connection by_address(ex, o);
  auto [ec] = co_await by_address.connect(tuple_token);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  BOOST_CHECK_EQUAL(threads_of_this_process(), before);
  auto r = co_await must(by_address, "PING");
  BOOST_CHECK(r.is_status());

  if (o.host != "127.0.0.1") co_return;  // "localhost" names this one
  o.host = "localhost";
  redis::connection by_name(ex, o);
  auto [named_ec] = co_await by_name.connect(tuple_token);
  BOOST_REQUIRE_MESSAGE(!named_ec, named_ec.message());
  r = co_await must(by_name, "PING");
  BOOST_CHECK(r.is_status());
}
}  // namespace

BOOST_AUTO_TEST_SUITE(redis_connection)

BOOST_AUTO_TEST_CASE(reply_kinds_and_error_replies) { run(&reply_kinds); }
BOOST_AUTO_TEST_CASE(hundred_thousand_commands_from_a_thousand_coroutines) { run(&many_coroutines); }
BOOST_AUTO_TEST_CASE(replies_complete_in_issue_order) { run(&completion_order); }
BOOST_AUTO_TEST_CASE(binary_safe_keys_and_values) { run(&binary_safe); }
BOOST_AUTO_TEST_CASE(select_and_client_setname) { run(&select_and_client_name); }
BOOST_AUTO_TEST_CASE(auth_with_acl_user_and_wrong_password) { run(&acl_user); }
BOOST_AUTO_TEST_CASE(evalsha_falls_back_to_eval_after_script_flush) { run(&script_fallback); }
BOOST_AUTO_TEST_CASE(cancelled_command_reply_is_dropped) { run(&cancelled_command_keeps_stream_in_sync); }
BOOST_AUTO_TEST_CASE(per_command_timeout) { run(&command_timeout); }
BOOST_AUTO_TEST_CASE(not_connected_closed_and_refused) { run(&refusals); }
BOOST_AUTO_TEST_CASE(commands_without_exactly_one_reply_are_refused) { run(&commands_without_one_reply_are_refused); }
BOOST_AUTO_TEST_CASE(empty_command_cannot_shift_a_locks_reply) {
  run(&empty_command_cannot_hand_a_lock_someone_elses_key);
}
BOOST_AUTO_TEST_CASE(noscript_never_reorders_a_script_after_later_commands) {
  run(&script_never_runs_after_commands_issued_later);
}
BOOST_AUTO_TEST_CASE(unexpected_bytes_fail_pending_commands_with_connection_lost) {
  run(&unexpected_bytes_reset_the_connection);
}
BOOST_AUTO_TEST_CASE(an_address_needs_no_resolver_thread) { run(&an_address_starts_no_resolver_thread); }

// A wait or a connect cancelled before it reached the connection's executor
// (here: before the io_context runs) ends with operation_aborted. Before,
// its slot was hooked only there: the emission was lost and the wait went
// on until the state came (never, here) or the connect timed out.
BOOST_AUTO_TEST_CASE(a_wait_or_connect_cancelled_before_it_starts_ends) {
  asio::io_context io;
  auto o = master_options();
  o.host = "127.0.0.1";
  o.port = 1;  // refused: without the cancellation, the connect ends with that refusal
  redis::connection c(io.get_executor(), o);
  asio::cancellation_signal wait_signal, connect_signal;
  std::optional<error_code> waited, connected;
  c.wait_for(redis::connection_state::connected,
             asio::bind_cancellation_slot(wait_signal.slot(), [&](error_code ec) { waited = ec; }));
  c.connect(asio::bind_cancellation_slot(connect_signal.slot(), [&](error_code ec) { connected = ec; }));
  wait_signal.emit(asio::cancellation_type::terminal);
  connect_signal.emit(asio::cancellation_type::terminal);
  io.run_for(std::chrono::seconds(5));
  BOOST_REQUIRE(waited.has_value());
  BOOST_TEST((*waited == asio::error::operation_aborted), waited->message());
  BOOST_REQUIRE(connected.has_value());
  BOOST_TEST((*connected == asio::error::operation_aborted), connected->message());
  c.close();
  io.run_for(std::chrono::seconds(1));
}

BOOST_AUTO_TEST_SUITE_END()
