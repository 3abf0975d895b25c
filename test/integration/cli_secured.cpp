// dlock against secured servers: a Redis ACL user, Redis over TLS (redis1's
// TLS port, with the throwaway CA of scripts/servers), and a ZooKeeper node
// that only a digest identity may use. Secrets come from the environment or
// from files, never from the command line.
#include "integration/cli_support.hpp"

#include <dlock/redis/connection.hpp>
#include <dlock/zk/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/test/unit_test.hpp>

#include <optional>

using namespace cli_test;
namespace asio = boost::asio;
namespace redis = dlock::redis;
namespace zk = dlock::zk;

namespace {

constexpr auto tuple_token = asio::as_tuple(asio::deferred);

/// Sets (or, with nullopt, unsets) an environment variable for dlocks started
/// in this scope; restores it at the end.
class scoped_env {
 public:
  scoped_env(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value->c_str(), 1);
    else ::unsetenv(name);
  }
  ~scoped_env() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string required_env(const char* name) {
  const char* value = std::getenv(name);
  BOOST_REQUIRE_MESSAGE(value && *value, name << " is not set (run scripts/servers start)");
  return value;
}

std::string tls_file(const std::string& name) { return required_env("DLOCK_REDIS_TLS_DIR") + "/" + name; }

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// --- talking to the servers directly (blocking, for set-up and checks) ---

template <class T>
T run_blocking(asio::awaitable<T> (*body)(std::vector<std::string>), std::vector<std::string> args) {
  asio::io_context io;
  std::optional<T> out;
  std::exception_ptr failed;
  asio::co_spawn(io, body(std::move(args)), [&](std::exception_ptr e, T value) {
    failed = e;
    out = std::move(value);
  });
  io.run();
  if (failed) std::rethrow_exception(failed);
  return std::move(*out);
}

// args: the command to send to the first Redis master; the reply's text, or its error.
asio::awaitable<std::string> redis_exec(std::vector<std::string> args) {
  auto master = dlock::test::redis_masters().at(0);
  redis::options o;
  o.host = master.host;
  o.port = master.port;
  o.reconnect = false;
  auto executor = co_await asio::this_coro::executor;
  redis::connection c(executor, o);
  auto [connect_ec] = co_await c.connect(tuple_token);
  if (connect_ec) co_return "connect: " + connect_ec.message();
  auto [ec, reply] = co_await c.exec(redis::command(args), tuple_token);
  c.close();
  co_return ec ? "error: " + std::string(reply.string()) : std::string(reply.string());
}

std::string redis_command(std::vector<std::string> args) { return run_blocking(&redis_exec, std::move(args)); }

/// An ACL user on the first Redis master for the test's lifetime.
struct acl_user {
  std::string name = dlock::test::unique_name("dlock-cli-user");
  std::string password = "s3cret pass";  // a space: passed whole, never split
  acl_user() { BOOST_REQUIRE_EQUAL(redis_command({"ACL", "SETUSER", name, "on", ">" + password, "~*", "+@all"}), "OK"); }
  ~acl_user() { redis_command({"ACL", "DELUSER", name}); }
  acl_user(const acl_user&) = delete;
  acl_user& operator=(const acl_user&) = delete;
};

// args: the path, "user:password". Creates the path as a persistent node only
// that identity may use (creator_all); with an empty path, deletes it.
asio::awaitable<std::string> zk_secured_node(std::vector<std::string> args) {
  auto colon = args[1].find(':');
  zk::options o;
  o.hosts = dlock::test::zk_hosts();
  o.digest_auth.push_back({args[1].substr(0, colon), args[1].substr(colon + 1)});
  o.default_acl = zk::acl_policy::creator_all;
  auto executor = co_await asio::this_coro::executor;
  zk::client c(executor, o);
  auto [connect_ec] = co_await c.connect(tuple_token);
  if (connect_ec) co_return "connect: " + connect_ec.message();
  boost::system::error_code ec;
  if (args.size() > 2) {
    std::tie(ec) = co_await c.remove(args[0], -1, tuple_token);
  } else {
    co_await c.create("/dlock-test", "", zk::create_mode::persistent, tuple_token);  // may exist
    auto [create_ec, created] = co_await c.create(args[0], "", zk::create_mode::persistent, tuple_token);
    ec = create_ec;
  }
  co_await c.close(tuple_token);
  co_return ec ? ec.message() : "ok";
}

/// A ZooKeeper node only `identity` ("user:password") may create children under.
struct secured_node {
  std::string path = "/dlock-test/" + dlock::test::unique_name("cli-digest");
  std::string identity;
  explicit secured_node(std::string who) : identity(std::move(who)) {
    BOOST_REQUIRE_EQUAL(run_blocking(&zk_secured_node, {path, identity}), "ok");
  }
  ~secured_node() { run_blocking(&zk_secured_node, {path, identity, "remove"}); }
  secured_node(const secured_node&) = delete;
  secured_node& operator=(const secured_node&) = delete;
};

std::vector<std::string> redis_lock(const std::string& address, std::vector<std::string> extra,
                                    const std::string& script = "true") {
  std::vector<std::string> args{"lock", "--redis", address, dlock::test::unique_name("cli-secured")};
  args.insert(args.end(), extra.begin(), extra.end());
  args.insert(args.end(), {"--", "sh", "-c", script});
  return args;
}

std::vector<std::string> zk_lock(const std::string& path, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"lock", "--zk", dlock::test::zk_hosts(), path, "--timeout", "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.insert(args.end(), {"--", "true"});
  return args;
}

// The clients connected to the first master as `user`, seen while `holder` holds its lock.
bool holder_connected_as(const std::string& user, const scratch& dir, std::unique_ptr<process> holder) {
  wait_for_file(dir.file("held"));
  bool seen = redis_command({"CLIENT", "LIST"}).find(" user=" + user) != std::string::npos;
  std::ofstream(dir.file("release")).put('\n');
  BOOST_CHECK_EQUAL(holder->wait(), 0);
  return seen;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_secured)

BOOST_AUTO_TEST_CASE(redis_acl_user_with_the_password_from_the_environment) {
  acl_user user;
  scratch dir;
  scoped_env password("DLOCK_REDIS_PASSWORD", user.password);
  auto holder = start_dlock(redis_lock(redis_address(0), {"--redis-user", user.name},
                                       hold_until(dir.file("held"), dir.file("release"))));
  BOOST_CHECK_MESSAGE(holder_connected_as(user.name, dir, std::move(holder)), "dlock did not log in as the ACL user");
  // dlock's secrets are not the command's.
  auto out = dir.file("seen");
  BOOST_CHECK_EQUAL(run_dlock(redis_lock(redis_address(0), {"--redis-user", user.name},
                                         "echo \"${DLOCK_REDIS_PASSWORD-unset}\""),
                              out),
                    0);
  BOOST_CHECK_EQUAL(read_file(out), "unset\n");
}

BOOST_AUTO_TEST_CASE(redis_acl_user_with_the_password_from_a_file) {
  acl_user user;
  scratch dir;
  scoped_env no_password("DLOCK_REDIS_PASSWORD", std::nullopt);
  write_file(dir.file("password"), user.password + "\n");  // as `echo` writes it
  BOOST_CHECK_EQUAL(run_dlock(redis_lock(redis_address(0), {"--redis-user", user.name, "--redis-password-file",
                                                            dir.file("password")})),
                    0);
  write_file(dir.file("wrong"), "not the password\n");
  auto errors = dir.file("stderr");
  BOOST_CHECK_EQUAL(run_dlock(redis_lock(redis_address(0), {"--redis-user", user.name, "--redis-password-file",
                                                            dir.file("wrong")}),
                              "/dev/null", errors),
                    125);
  BOOST_TEST_MESSAGE("wrong password: " << read_file(errors));
  // The file wins over the environment.
  scoped_env wrong("DLOCK_REDIS_PASSWORD", "not the password");
  BOOST_CHECK_EQUAL(run_dlock(redis_lock(redis_address(0), {"--redis-user", user.name, "--redis-password-file",
                                                            dir.file("password")})),
                    0);
}

BOOST_AUTO_TEST_CASE(redis_over_tls) {
  auto address = required_env("DLOCK_REDIS_TLS");
  auto ca = tls_file("ca.crt");
  BOOST_CHECK_EQUAL(run_dlock(redis_lock(address, {"--tls", "--tls-ca", ca})), 0);
  BOOST_CHECK_EQUAL(run_dlock(redis_lock(address, {"--tls", "--tls-ca", ca, "--tls-cert", tls_file("client.crt"),
                                                   "--tls-key", tls_file("client.key")})),
                    0);
  // The system's trust store does not know the test CA: the handshake fails.
  scratch dir;
  auto errors = dir.file("stderr");
  BOOST_CHECK_EQUAL(run_dlock(redis_lock(address, {"--tls"}), "/dev/null", errors), 125);
  BOOST_TEST_MESSAGE("unknown CA: " << read_file(errors));
  // The name the certificate does not carry.
  BOOST_CHECK_EQUAL(run_dlock(redis_lock(address, {"--tls", "--tls-ca", ca, "--tls-server-name", "elsewhere.example"})),
                    125);
}

BOOST_AUTO_TEST_CASE(redis_acl_user_over_tls) {
  acl_user user;  // redis1 serves both ports: the user exists on its TLS port too
  scratch dir;
  scoped_env password("DLOCK_REDIS_PASSWORD", user.password);
  auto holder = start_dlock(redis_lock(required_env("DLOCK_REDIS_TLS"),
                                       {"--tls", "--tls-ca", tls_file("ca.crt"), "--redis-user", user.name},
                                       hold_until(dir.file("held"), dir.file("release"))));
  BOOST_CHECK_MESSAGE(holder_connected_as(user.name, dir, std::move(holder)), "dlock did not log in as the ACL user");
}

BOOST_AUTO_TEST_CASE(zookeeper_digest_credentials) {
  secured_node node("dlock-cli:s3cret");
  scratch dir;
  {
    scoped_env none("DLOCK_ZK_AUTH", std::nullopt);
    BOOST_CHECK_EQUAL(run_dlock(zk_lock(node.path)), 125);  // not authenticated: no node may be created
  }
  {
    scoped_env wrong("DLOCK_ZK_AUTH", "dlock-cli:guess");
    BOOST_CHECK_EQUAL(run_dlock(zk_lock(node.path)), 125);
  }
  {
    scoped_env right("DLOCK_ZK_AUTH", node.identity);
    BOOST_CHECK_EQUAL(run_dlock(zk_lock(node.path)), 0);
    BOOST_CHECK_EQUAL(run_dlock({"queue", "--zk", dlock::test::zk_hosts(), node.path + "/q", "put", "x"}), 0);
    BOOST_CHECK_EQUAL(run_dlock({"queue", "--zk", dlock::test::zk_hosts(), node.path + "/q", "take"}), 0);
  }
  {
    scoped_env wrong("DLOCK_ZK_AUTH", "dlock-cli:guess");
    write_file(dir.file("auth"), node.identity + "\n");
    BOOST_CHECK_EQUAL(run_dlock(zk_lock(node.path, {"--zk-auth-file", dir.file("auth")})), 0);  // the file wins
    BOOST_CHECK_EQUAL(run_dlock({"elect", "--zk", dlock::test::zk_hosts(), node.path + "/e", "--zk-auth-file",
                                 dir.file("auth"), "--", "true"}),
                      0);
  }
}

BOOST_AUTO_TEST_CASE(bad_secret_options_are_usage_errors) {
  scratch dir;
  auto zk = dlock::test::zk_hosts();
  auto redis = redis_address(0);
  scoped_env no_password("DLOCK_REDIS_PASSWORD", std::nullopt);
  std::vector<std::vector<std::string>> bad = {
      redis_lock(redis, {"--redis-user", "someone"}),  // a user without a password
      redis_lock(redis, {"--redis-password-file", dir.file("missing")}),
      redis_lock(redis, {"--tls-ca", dir.file("ca")}),  // without --tls
      redis_lock(redis, {"--tls", "--tls-cert", dir.file("cert")}),  // a certificate without its key
      redis_lock(redis, {"--zk-auth-file", dir.file("auth")}),
      zk_lock("/p", {"--tls"}),
      zk_lock("/p", {"--redis-user", "someone"}),
      zk_lock("/p", {"--zk-auth-file", dir.file("missing")}),
  };
  for (const auto& args : bad) {
    std::string shown;
    for (const auto& a : args) shown += a + " ";
    BOOST_TEST_CONTEXT("dlock " << shown) { BOOST_CHECK_EQUAL(run_dlock(args), 2); }
  }
  scoped_env malformed("DLOCK_ZK_AUTH", "no-colon");
  BOOST_CHECK_EQUAL(run_dlock(zk_lock("/p")), 2);
}

BOOST_AUTO_TEST_SUITE_END()
