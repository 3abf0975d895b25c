// dlock lock: run CMD while holding a ZooKeeper mutex (or read lock), a Redis
// lock, or one lease of a semaphore on either (--permits).
#include "dlock/backend.hpp"
#include "dlock/command_line.hpp"
#include "dlock/commands.hpp"
#include "dlock/hold.hpp"
#include "dlock/lock_stats.hpp"
#include "dlock/server_options.hpp"

#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/redis/semaphore.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/semaphore.hpp>
#include <dlock/zk/shared_mutex.hpp>

#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <csignal>
#include <cstdio>
#include <memory>

namespace dlock::cli {
namespace {

using std::chrono::milliseconds;

// "Wait for ever" for the Redis locks, whose waits are bounded by an option:
// dlock's own --timeout timer (or a signal) ends the wait instead.
constexpr milliseconds practically_forever = std::chrono::hours(24 * 365 * 10);

struct lock_settings {
  std::optional<zk_settings> zk;  // none: Redis
  redis_settings redis;
  bool shared = false;
  std::optional<std::size_t> permits;  // a semaphore of this many leases, not a lock
  milliseconds ttl{10'000};
  hold_settings hold;
  std::shared_ptr<lock_stats> stats;  // --stats: the lock's observer
};

po::options_description lock_options() {
  po::options_description options("Options");
  options.add_options()
      ("zk", po::value<std::string>(), "ZooKeeper servers \"host:port,...[/chroot]\"; the lock is PATH")
      ("redis", po::value<std::string>(), "one Redis server (a single-instance lock) or several masters "
                                          "(Redlock), HOST:PORT[,HOST:PORT...]; the lock is KEY")
      ("sentinel", po::value<std::string>(), "instead of --redis: the sentinels HOST:PORT[,...] that name the "
                                             "master (with --master-name); a failover loses the lock (status 121)")
      ("master-name", po::value<std::string>(), "Sentinel: the name the sentinels monitor the master under")
      ("shared", "ZooKeeper: take the read side of the read/write lock at PATH")
      ("permits", po::value<long long>(), "hold one lease of a semaphore of N at PATH (ZooKeeper, Curator's "
                                          "InterProcessSemaphoreV2) or KEY (one Redis server): up to N commands run at once")
      ("timeout", po::value<std::string>(), "give up (status 124) if not acquired within D, connecting included "
                                            "(0: one attempt)")
      ("ttl", po::value<std::string>()->default_value("10s"), "Redis: the lock's TTL (extended while CMD runs)")
      ("session-timeout", po::value<std::string>()->default_value("10s"), "ZooKeeper: the session timeout")
      ("grace", po::value<std::string>()->default_value("5s"), "after a loss, SIGKILL CMD this long after SIGTERM")
      ("stats", "on exit, print the lock's wait, hold and extension figures on stderr (one JSON line)")
      ("name", po::value<std::string>(), "the lock's PATH or KEY (positional)");
  add_connect_timeout_option(options);
  add_zk_auth_options(options);
  add_redis_auth_options(options);
  add_common_options(options);
  return options;
}

lock_settings settings_from(const parsed_arguments& parsed) {
  const auto& values = parsed.values;
  lock_settings s;
  auto zk = string_option(values, "zk");
  auto redis = string_option(values, "redis");
  auto sentinel = string_option(values, "sentinel");
  if (int(zk.has_value()) + int(redis.has_value()) + int(sentinel.has_value()) != 1)
    throw usage_error("give exactly one of --zk, --redis and --sentinel");
  if (sentinel.has_value() != (values.count("master-name") > 0))
    throw usage_error("--sentinel and --master-name go together");
  if (!sentinel && (values.count("sentinel-user") || values.count("sentinel-password-file")))
    throw usage_error("--sentinel-user and --sentinel-password-file are for --sentinel");
  s.hold.name = required_string(values, "name", zk ? "missing the lock's PATH" : "missing the lock's KEY");
  s.hold.command = parsed.command;
  s.hold.timeout = duration_option(values, "timeout");
  s.hold.grace = *duration_option(values, "grace");
  s.shared = values.count("shared") > 0;
  if (values.count("stats")) s.stats = std::make_shared<lock_stats>();
  if (values.count("permits")) {  // signed: "-1" is refused, not wrapped around
    auto permits = values["permits"].as<long long>();
    if (permits <= 0) throw usage_error("--permits must be more than 0");
    s.permits = static_cast<std::size_t>(permits);
  }
  if (s.permits && s.shared) throw usage_error("give at most one of --permits and --shared");
  if (zk) {
    if (zk->empty()) throw usage_error("--zk: no servers given");
    require_zk_path(s.hold.name);
    if (!values["ttl"].defaulted()) throw usage_error("--ttl is for --redis");
    s.zk = zk_settings_from(values, *zk, *duration_option(values, "session-timeout"));
  } else {
    const auto& list = redis ? *redis : *sentinel;
    auto addresses = parse_host_list(list);
    if (!addresses)
      throw usage_error((redis ? "--redis: '" : "--sentinel: '") + list +
                        "' is not HOST:PORT[,HOST:PORT...] with each server once");
    if (s.shared) throw usage_error("--shared is for --zk");
    if (redis && s.permits && addresses->size() != 1) throw usage_error("--permits takes one Redis server");
    if (redis) s.redis = redis_settings_from(values, std::move(*addresses));
    else s.redis = sentinel_settings_from(values, std::move(*addresses), required_string(values, "master-name", "--master-name: empty"));
    s.ttl = *duration_option(values, "ttl");
    if (s.ttl.count() == 0) throw usage_error("--ttl must be more than 0");
  }
  return s;
}

// Every lock `dlock lock` takes is a dlock::fenced_lockable, with fencing on:
// its token is exported as DLOCK_FENCING_TOKEN.
static_assert(dlock::fenced_lockable<zk::mutex>);  // shared_mutex::reader() is a zk::mutex too
static_assert(dlock::fenced_lockable<redis::lock> && dlock::fenced_lockable<redis::redlock>);

// A session that expires while dlock waits (a partition, say) costs its
// place in the queue, not the wait: the acquire starts again on the next session.
// Practically unlimited, with the backoff capped (retry_policy::max_backoff).
constexpr int waiting_retries = 1'000'000;

zk::lock_options zk_lock_options(const lock_settings& s) {
  zk::lock_options options;
  options.observer = s.stats;
  options.restart_after_expiry = true;
  // Connection losses while waiting are retried until --timeout: a partition
  // that outlasts the library's default attempts must not end the wait.
  options.retry.max_attempts = waiting_retries;
  return options;
}

asio::awaitable<int> hold_on_zk(zk::client& client, lock_settings s, asio::steady_timer& deadline,
                                asio::signal_set& stop) {
  if (s.permits) {  // a lease has no fencing token: DLOCK_FENCING_TOKEN is not set
    zk::semaphore_options options;
    options.retry.max_attempts = waiting_retries;
    options.observer = s.stats;
    zk::semaphore lease(client, s.hold.name, *s.permits, options);
    co_return co_await hold_while_running(lease, s.hold, deadline, stop);
  }
  if (s.shared) {
    zk::shared_mutex lock(client, s.hold.name, zk_lock_options(s));
    co_return co_await hold_while_running(lock.reader(), s.hold, deadline, stop);
  }
  zk::mutex lock(client, s.hold.name, zk_lock_options(s));
  co_return co_await hold_while_running(lock, s.hold, deadline, stop);
}

asio::awaitable<int> lock_on_zk(lock_settings s) {
  auto executor = co_await asio::this_coro::executor;
  asio::signal_set stop(executor, SIGINT, SIGTERM, SIGHUP);
  asio::steady_timer deadline(executor);
  arm_deadline(deadline, s.hold);
  auto client = make_zk_client(executor, *s.zk);
  auto connected = co_await connect_within(connect_zk(client, s.zk->hosts), deadline, stop);
  int status = status_for(connected, s.hold);
  if (status == exit_status::success) status = co_await hold_on_zk(*client, s, deadline, stop);
  co_await close_zk(*client);  // our node goes now, not at session expiry
  co_return status;
}

// A timed-out, cancelled or failed Redlock acquire deletes its attempt's keys
// in the background. Closing the connections at once would drop a delete
// still queued, and the keys would stay until their TTL: dlock waits for them
// to settle (a master that does not answer is given up after the lock's
// master_timeout), at most this long.
constexpr milliseconds cleanup_limit{2000};

asio::awaitable<void> settle_cleanups(redis::redlock& lock) {
  asio::steady_timer limit(co_await asio::this_coro::executor, cleanup_limit);
  namespace ex = asio::experimental;
  co_await ex::make_parallel_group(lock.settle(asio::deferred), limit.async_wait(asio::deferred))
      .async_wait(ex::wait_for_one(), asio::use_awaitable);
}

asio::awaitable<int> hold_on_redis(std::vector<std::shared_ptr<redis::connection>> connections, lock_settings s,
                                   asio::steady_timer& deadline, asio::signal_set& stop) {
  if (s.permits) {  // a lease has no fencing token: DLOCK_FENCING_TOKEN is not set
    redis::semaphore lease(*connections.front(), s.hold.name, *s.permits,
                           {.ttl = s.ttl, .wait = practically_forever, .auto_extend = true, .observer = s.stats});
    co_return co_await hold_while_running(lease, s.hold, deadline, stop);
  }
  if (connections.size() == 1) {
    redis::lock lock(*connections.front(), s.hold.name,
                     {.ttl = s.ttl, .wait = practically_forever, .auto_extend = true, .fencing = true, .observer = s.stats});
    co_return co_await hold_while_running(lock, s.hold, deadline, stop);
  }
  auto executor = co_await asio::this_coro::executor;
  redis::redlock lock(executor, connections, s.hold.name,
                      {.ttl = s.ttl,
                       .retry_count = -1,
                       .wait_limit = practically_forever,
                       .auto_extend = true,
                       .fencing = true,
                       .observer = s.stats});
  int status = co_await hold_while_running(lock, s.hold, deadline, stop);
  co_await settle_cleanups(lock);
  co_return status;
}

asio::awaitable<int> lock_on_redis(lock_settings s) {
  auto executor = co_await asio::this_coro::executor;
  asio::signal_set stop(executor, SIGINT, SIGTERM, SIGHUP);
  asio::steady_timer deadline(executor);
  arm_deadline(deadline, s.hold);
  auto connections = make_redis_connections(executor, s.redis);
  auto connected = co_await connect_within(connect_redis(connections), deadline, stop);
  int status = status_for(connected, s.hold);
  if (status == exit_status::success) status = co_await hold_on_redis(connections, s, deadline, stop);
  close_redis(connections);
  co_return status;
}

}  // namespace

int lock_command(const std::vector<std::string>& args) {
  auto options = lock_options();
  auto parsed_or_help = parse_or_print_help(args, "lock", options, {"name"}, true,
      "CMD runs with DLOCK_LOCK_NAME (PATH or KEY) and DLOCK_FENCING_TOKEN (the hold's\n"
      "fencing token: a ZooKeeper zxid, or the Redis key's counter; none for a --permits lease) in its\n"
      "environment. SIGINT, SIGTERM and SIGHUP are forwarded to CMD; the lock is\n"
      "released once CMD exits. If the lock is lost, CMD gets SIGTERM, then SIGKILL.\n"
      "Durations: 500ms, 30s, 2m, 1h (a bare number is seconds).\n\n" +
      std::string(secrets_help_text(true)) + std::string(exit_status::help_text()));
  if (!parsed_or_help) return exit_status::success;
  auto& parsed = *parsed_or_help;
  auto settings = settings_from(parsed);
  route_library_log(parsed.values.count("verbose") > 0);
  auto stats = settings.stats;
  auto run = settings.zk ? &lock_on_zk : &lock_on_redis;
  int status = run_to_exit_status(run, std::move(settings));
  // CMD owns stdout: the figures go to stderr, after everything it printed.
  if (stats) std::fprintf(stderr, "%s\n", stats->json().c_str());
  return status;
}

}  // namespace dlock::cli
