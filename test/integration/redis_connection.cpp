// dlock::redis::connection against a real redis-server: replies, pipelining,
// AUTH / SELECT / SETNAME, binary safety, scripts, cancellation, timeouts.
#include "redis_support.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/connection.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

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
  auto [ec, r] = co_await std::move(first_op);  // NOSCRIPT -> EVAL
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

asio::awaitable<void> command_timeout(asio::any_io_executor ex) {
  auto o = master_options();
  o.command_timeout = std::chrono::milliseconds(100);
  redis::connection c(ex, o);
  co_await c.connect();
  auto key = dlock::test::unique_name("timeout");
  auto [ec, r] = co_await attempt(c, "BLPOP", key, "0.5");
  BOOST_CHECK(ec == redis::error::timed_out);
  // The late nil is dropped; the next reply is the right one.
  auto [ec2, r2] = co_await attempt(c, "BLPOP", key, "0.5");
  BOOST_CHECK(ec2 == redis::error::timed_out);
  o.command_timeout = std::chrono::milliseconds(2000);
  redis::connection pusher(ex, master_options());
  co_await pusher.connect();
  asio::steady_timer t(ex, std::chrono::milliseconds(1200));
  co_await t.async_wait(tuple_token);
  auto echo = co_await must(c, "ECHO", "in sync");
  BOOST_CHECK_EQUAL(echo.string(), "in sync");
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

BOOST_AUTO_TEST_SUITE_END()
