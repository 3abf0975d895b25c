#include "dlock/backend.hpp"

#include "dlock/run.hpp"

#include <dlock/log.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

namespace dlock::cli {
namespace {

constexpr auto with_error = asio::as_tuple(asio::deferred);

std::string address_text(const redis::connection& connection) {
  const auto& o = connection.get_options();
  if (!o.sentinel.master_name.empty()) return "the master '" + o.sentinel.master_name + "' (Sentinel)";
  return o.host + ":" + std::to_string(o.port);
}

// The connects' outcomes so far; `news` is cancelled at each one, waking
// connect_redis (the connects complete on this thread, so none is missed).
struct connect_tally {
  explicit connect_tally(asio::any_io_executor executor) : news(executor) {}
  std::size_t connected = 0;
  std::size_t failed = 0;
  std::string last_error;
  bool decided = false;  // connect_redis has returned (or was abandoned): later outcomes are not news
  asio::steady_timer news;
};

struct mark_decided {
  std::shared_ptr<connect_tally> tally;
  ~mark_decided() { tally->decided = true; }
};

}  // namespace

std::shared_ptr<zk::client> make_zk_client(asio::any_io_executor executor, const zk_settings& settings) {
  zk::options options;
  options.hosts = settings.hosts;
  options.session_timeout = settings.session_timeout;
  options.connect_timeout = settings.connect_timeout;
  if (settings.auth) options.digest_auth.push_back({settings.auth->user, settings.auth->password});
  auto client = std::make_shared<zk::client>(std::move(executor), options);
  keep_until_drained(client);
  return client;
}

asio::awaitable<void> connect_zk(std::shared_ptr<zk::client> client, std::string hosts) {
  auto [ec] = co_await client->connect(with_error);
  if (ec) throw failure("cannot connect to ZooKeeper at " + hosts + ": " + ec.message());
}

asio::awaitable<void> close_zk(zk::client& client) {
  auto [ec] = co_await client.close(with_error);
  if (ec) detail::log(log_level::debug, "closing the ZooKeeper session: " + ec.message());
}

std::vector<std::shared_ptr<redis::connection>> make_redis_connections(asio::any_io_executor executor,
                                                                       const redis_settings& settings) {
  std::vector<std::shared_ptr<redis::connection>> connections;
  auto add = [&](const std::string& host, std::uint16_t port) {
    redis::options options;
    options.host = host;
    options.port = port;
    options.sentinel = settings.sentinel;
    options.connect_timeout = settings.connect_timeout;
    options.username = settings.username;
    options.password = settings.password;
    options.tls = settings.tls;
    auto connection = std::make_shared<redis::connection>(executor, options);
    keep_until_drained(connection);
    connections.push_back(std::move(connection));
  };
  if (!settings.sentinel.master_name.empty()) add("127.0.0.1", 6379);  // not used: the sentinels say
  for (const auto& master : settings.masters) add(master.host, master.port);
  return connections;
}

asio::awaitable<void> connect_redis(std::vector<std::shared_ptr<redis::connection>> connections) {
  auto tally = std::make_shared<connect_tally>(co_await asio::this_coro::executor);
  const bool several = connections.size() > 1;
  for (auto& connection : connections) {
    connection->connect([tally, where = address_text(*connection), several](error_code ec) {
      if (tally->decided) return;
      if (ec) {
        ++tally->failed;
        tally->last_error = "cannot connect to Redis at " + where + ": " + ec.message();
        if (several) detail::log(log_level::warning, tally->last_error);
      } else {
        ++tally->connected;
      }
      tally->news.cancel();
    });
  }
  mark_decided on_return{tally};
  const std::size_t majority = connections.size() / 2 + 1;
  while (tally->connected < majority && tally->failed <= connections.size() - majority) {
    tally->news.expires_at(asio::steady_timer::time_point::max());
    co_await tally->news.async_wait(with_error);  // a cancellation of ours throws at the next co_await
  }
  if (tally->connected < majority)
    throw failure(several ? "cannot connect to a majority of the Redis masters" : tally->last_error);
}

void close_redis(const std::vector<std::shared_ptr<redis::connection>>& connections) {
  for (const auto& connection : connections) connection->close();
}

}  // namespace dlock::cli
