// dlock::redis::connection over TLS, against redis1's TLS port (scripts/servers
// makes a throwaway CA and certificates: DLOCK_REDIS_TLS, DLOCK_REDIS_TLS_DIR).
#include "redis_support.hpp"

#include <dlock/redis/connection.hpp>
#include <dlock/redis/lock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdlib>
#include <memory>
#include <string>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using dlock::error_code;
using redis_test::run;

namespace {

constexpr auto tuple_token = asio::as_tuple(asio::deferred);

std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  BOOST_REQUIRE_MESSAGE(v && *v, std::string(name) + " is not set (scripts/servers start exports it)");
  return v;
}

std::string tls_file(const std::string& name) { return required_env("DLOCK_REDIS_TLS_DIR") + "/" + name; }

// The TLS endpoint, verified against the test CA.
redis::options tls_options() {
  auto endpoint = required_env("DLOCK_REDIS_TLS");
  auto colon = endpoint.rfind(':');
  redis::options o;
  o.host = endpoint.substr(0, colon);
  o.port = static_cast<std::uint16_t>(std::stoi(endpoint.substr(colon + 1)));
  o.tls.enabled = true;
  o.tls.ca_file = tls_file("ca.crt");
  o.reconnect = false;
  return o;
}

asio::awaitable<error_code> connect_with(asio::any_io_executor ex, redis::options o) {
  redis::connection c(ex, o);
  auto op = c.connect(tuple_token);
  auto [ec] = co_await std::move(op);
  co_return ec;
}

asio::awaitable<void> set_get(redis::connection& c, std::string key) {
  auto set = c.exec(redis::command("SET", key, "over tls"), tuple_token);
  auto [set_ec, ok] = co_await std::move(set);
  BOOST_REQUIRE_MESSAGE(!set_ec, set_ec.message());
  auto get = c.exec(redis::command("GET", key), tuple_token);
  auto [get_ec, value] = co_await std::move(get);
  BOOST_REQUIRE(!get_ec);
  BOOST_CHECK_EQUAL(value.string(), "over tls");
}

asio::awaitable<void> commands_over_tls(asio::any_io_executor ex) {
  redis::connection c(ex, tls_options());
  co_await c.connect();
  co_await set_get(c, dlock::test::unique_name("tls"));
}

struct pipelined {
  int done = 0;
  int failed = 0;
};

asio::awaitable<void> one_incr(redis::connection& c, std::string key, std::shared_ptr<pipelined> tally) {
  auto op = c.exec(redis::command("INCR", key), tuple_token);
  auto [ec, r] = co_await std::move(op);
  ++tally->done;
  if (ec) ++tally->failed;
}

// Many commands at once: they share writes, and the TLS stream keeps the
// replies in order as the plain socket does.
asio::awaitable<void> pipelining_over_tls(asio::any_io_executor ex) {
  redis::connection c(ex, tls_options());
  co_await c.connect();
  auto key = dlock::test::unique_name("tls-incr");
  auto tally = std::make_shared<pipelined>();
  constexpr int n = 2000;
  for (int i = 0; i < n; ++i) asio::co_spawn(ex, one_incr(c, key, tally), asio::detached);
  asio::steady_timer pause(ex);
  for (int waited = 0; tally->done < n && waited < 2000; ++waited) {
    pause.expires_after(std::chrono::milliseconds(5));
    co_await pause.async_wait(tuple_token);
  }
  BOOST_REQUIRE_EQUAL(tally->done, n);
  BOOST_CHECK_EQUAL(tally->failed, 0);
  auto get = c.exec(redis::command("GET", key), tuple_token);
  auto [ec, value] = co_await std::move(get);
  BOOST_REQUIRE(!ec);
  BOOST_CHECK_EQUAL(value.string(), std::to_string(n));
  auto stats = c.stats();
  BOOST_CHECK_LT(stats.writes, stats.commands);
}

asio::awaitable<void> lock_over_tls(asio::any_io_executor ex) {
  redis::connection c(ex, tls_options());
  co_await c.connect();
  redis::lock first(c, dlock::test::unique_name("tls-lock"));
  co_await first.acquire();
  redis::lock second(c, first.key());
  auto attempt = second.try_acquire(tuple_token);
  auto [taken] = co_await std::move(attempt);
  BOOST_CHECK(taken == dlock::error::taken);
  co_await first.release();
  co_await second.try_acquire();
  co_await second.release();
}

asio::awaitable<void> client_certificate(asio::any_io_executor ex) {
  auto o = tls_options();
  o.tls.cert_file = tls_file("client.crt");
  o.tls.key_file = tls_file("client.key");
  redis::connection c(ex, o);
  co_await c.connect();
  co_await set_get(c, dlock::test::unique_name("tls-cert"));
}

asio::awaitable<void> refusals(asio::any_io_executor ex) {
  auto untrusted = tls_options();
  untrusted.tls.ca_file.clear();  // the system store does not know the test CA
  error_code ec = co_await connect_with(ex, untrusted);
  BOOST_CHECK_MESSAGE(ec, "a server signed by an unknown CA was accepted");
  BOOST_TEST_MESSAGE("unknown CA: " << ec.message());

  auto wrong_name = tls_options();
  wrong_name.tls.server_name = "not-the-server.example";
  ec = co_await connect_with(ex, wrong_name);
  BOOST_CHECK_MESSAGE(ec, "a certificate for another name was accepted");
  BOOST_TEST_MESSAGE("wrong name: " << ec.message());

  auto missing_ca = tls_options();
  missing_ca.tls.ca_file = tls_file("no-such-ca.crt");
  ec = co_await connect_with(ex, missing_ca);
  BOOST_CHECK_MESSAGE(ec, "a missing CA file was not reported");

  // Verification off accepts the unknown CA (for tests only, as the option says).
  auto unverified = tls_options();
  unverified.tls.ca_file.clear();
  unverified.tls.verify_peer = false;
  ec = co_await connect_with(ex, unverified);
  BOOST_CHECK_MESSAGE(!ec, ec.message());
}

// Plain RESP sent to the TLS port is not a handshake: the server drops it.
asio::awaitable<void> plaintext_to_tls_port(asio::any_io_executor ex) {
  auto o = tls_options();
  o.tls.enabled = false;
  redis::connection c(ex, o);
  auto connecting = c.connect(tuple_token);
  auto [connect_ec] = co_await std::move(connecting);
  if (connect_ec) co_return;  // refused outright: also a failure, as it should be
  auto ping = c.exec(redis::command("PING"), tuple_token);
  auto [ec, r] = co_await std::move(ping);
  BOOST_CHECK_MESSAGE(ec, "a plaintext PING got an answer from the TLS port");
}

}  // namespace

BOOST_AUTO_TEST_CASE(commands) { run(&commands_over_tls); }
BOOST_AUTO_TEST_CASE(pipelining) { run(&pipelining_over_tls); }
BOOST_AUTO_TEST_CASE(lock) { run(&lock_over_tls); }
BOOST_AUTO_TEST_CASE(with_client_certificate) { run(&client_certificate); }
BOOST_AUTO_TEST_CASE(refused_when_unverifiable) { run(&refusals); }
BOOST_AUTO_TEST_CASE(plaintext_is_refused) { run(&plaintext_to_tls_port); }
