// dlock lock: run CMD while holding a ZooKeeper mutex (or read lock) or a Redis lock.
#include "dlock/backend.hpp"
#include "dlock/command_line.hpp"
#include "dlock/commands.hpp"
#include "dlock/hold.hpp"

#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/shared_mutex.hpp>

#include <boost/asio/signal_set.hpp>

#include <csignal>

namespace dlock::cli {
namespace {

using std::chrono::milliseconds;

// "Wait for ever" for the Redis locks, whose waits are bounded by an option:
// dlock's own --timeout timer (or a signal) ends the wait instead.
constexpr milliseconds practically_forever = std::chrono::hours(24 * 365 * 10);

struct lock_settings {
  std::string zk_hosts;            // empty: Redis
  std::vector<host_port> redis;
  bool shared = false;
  milliseconds ttl{10'000};
  milliseconds session_timeout = default_session_timeout;
  hold_settings hold;
};

po::options_description lock_options() {
  po::options_description options("Options");
  options.add_options()
      ("zk", po::value<std::string>(), "ZooKeeper servers \"host:port,...[/chroot]\"; the lock is PATH")
      ("redis", po::value<std::string>(), "one Redis server (a single-instance lock) or several masters "
                                          "(Redlock), HOST:PORT[,HOST:PORT...]; the lock is KEY")
      ("shared", "ZooKeeper: take the read side of the read/write lock at PATH")
      ("timeout", po::value<std::string>(), "give up (status 124) if not acquired within D (0: one attempt)")
      ("ttl", po::value<std::string>()->default_value("10s"), "Redis: the lock's TTL (extended while CMD runs)")
      ("session-timeout", po::value<std::string>()->default_value("10s"), "ZooKeeper: the session timeout")
      ("grace", po::value<std::string>()->default_value("5s"), "after a loss, SIGKILL CMD this long after SIGTERM")
      ("name", po::value<std::string>(), "the lock's PATH or KEY (positional)");
  add_common_options(options);
  return options;
}

lock_settings settings_from(const parsed_arguments& parsed) {
  const auto& values = parsed.values;
  lock_settings s;
  auto zk = string_option(values, "zk");
  auto redis = string_option(values, "redis");
  if (zk.has_value() == redis.has_value()) throw usage_error("give exactly one of --zk and --redis");
  s.hold.name = required_string(values, "name", zk ? "missing the lock's PATH" : "missing the lock's KEY");
  s.hold.command = parsed.command;
  s.hold.timeout = duration_option(values, "timeout");
  s.hold.grace = *duration_option(values, "grace");
  s.shared = values.count("shared") > 0;
  if (zk) {
    if (zk->empty()) throw usage_error("--zk: no servers given");
    require_zk_path(s.hold.name);
    if (!values["ttl"].defaulted()) throw usage_error("--ttl is for --redis");
    s.zk_hosts = *zk;
    s.session_timeout = *duration_option(values, "session-timeout");
  } else {
    auto addresses = parse_host_list(*redis);
    if (!addresses) throw usage_error("--redis: '" + *redis + "' is not HOST:PORT[,HOST:PORT...] with each master once");
    if (s.shared) throw usage_error("--shared is for --zk");
    s.redis = std::move(*addresses);
    s.ttl = *duration_option(values, "ttl");
    if (s.ttl.count() == 0) throw usage_error("--ttl must be more than 0");
  }
  return s;
}

asio::awaitable<int> lock_on_zk(lock_settings s) {
  asio::signal_set stop(co_await asio::this_coro::executor, SIGINT, SIGTERM, SIGHUP);
  auto client = co_await connect_zk(s.zk_hosts, s.session_timeout);
  int status = exit_status::failed;
  if (s.shared) {
    zk::shared_mutex lock(*client, s.hold.name);
    status = co_await hold_while_running(lock.reader(), s.hold, stop);
  } else {
    zk::mutex lock(*client, s.hold.name);
    status = co_await hold_while_running(lock, s.hold, stop);
  }
  co_await close_zk(*client);  // our node goes now, not at session expiry
  co_return status;
}

asio::awaitable<int> lock_on_redis(lock_settings s) {
  auto executor = co_await asio::this_coro::executor;
  asio::signal_set stop(executor, SIGINT, SIGTERM, SIGHUP);
  auto connections = co_await connect_redis(s.redis);
  int status = exit_status::failed;
  if (connections.size() == 1) {
    redis::lock lock(*connections.front(), s.hold.name,
                     {.ttl = s.ttl, .wait = practically_forever, .auto_extend = true});
    status = co_await hold_while_running(lock, s.hold, stop);
  } else {
    redis::redlock lock(executor, connections, s.hold.name,
                        {.ttl = s.ttl, .retry_count = -1, .wait_limit = practically_forever, .auto_extend = true});
    status = co_await hold_while_running(lock, s.hold, stop);
  }
  for (auto& connection : connections) connection->close();
  co_return status;
}

}  // namespace

int lock_command(const std::vector<std::string>& args) {
  auto options = lock_options();
  auto parsed_or_help = parse_or_print_help(args, "lock", options, {"name"}, true,
      "CMD runs with DLOCK_LOCK_NAME (PATH or KEY) and, on ZooKeeper, DLOCK_FENCING_TOKEN\n"
      "in its environment. SIGINT, SIGTERM and SIGHUP are forwarded to CMD; the lock is\n"
      "released once CMD exits. If the lock is lost, CMD gets SIGTERM, then SIGKILL.\n"
      "Durations: 500ms, 30s, 2m, 1h (a bare number is seconds).\n\n" +
      std::string(exit_status::help_text()));
  if (!parsed_or_help) return exit_status::success;
  auto& parsed = *parsed_or_help;
  auto settings = settings_from(parsed);
  route_library_log(parsed.values.count("verbose") > 0);
  if (!settings.zk_hosts.empty()) return run_to_exit_status(&lock_on_zk, std::move(settings));
  return run_to_exit_status(&lock_on_redis, std::move(settings));
}

}  // namespace dlock::cli
