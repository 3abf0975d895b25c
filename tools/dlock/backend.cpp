#include "dlock/backend.hpp"

#include "dlock/run.hpp"

#include <dlock/log.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/this_coro.hpp>

namespace dlock::cli {
namespace {

constexpr auto with_error = asio::as_tuple(asio::deferred);

std::string address_text(const host_port& address) { return address.host + ":" + std::to_string(address.port); }

}  // namespace

asio::awaitable<std::shared_ptr<zk::client>> connect_zk(std::string hosts,
                                                        std::chrono::milliseconds session_timeout) {
  zk::options options;
  options.hosts = hosts;
  options.session_timeout = session_timeout;
  auto client = std::make_shared<zk::client>(co_await asio::this_coro::executor, options);
  keep_until_drained(client);
  auto [ec] = co_await client->connect(with_error);
  if (ec) throw failure("cannot connect to ZooKeeper at " + hosts + ": " + ec.message());
  co_return client;
}

asio::awaitable<void> close_zk(zk::client& client) {
  auto [ec] = co_await client.close(with_error);
  if (ec) detail::log(log_level::debug, "closing the ZooKeeper session: " + ec.message());
}

asio::awaitable<std::vector<std::shared_ptr<redis::connection>>> connect_redis(std::vector<host_port> addresses) {
  auto executor = co_await asio::this_coro::executor;
  std::vector<std::shared_ptr<redis::connection>> connections;
  std::size_t connected = 0;
  std::string last_error;
  for (const auto& address : addresses) {
    redis::options options;
    options.host = address.host;
    options.port = address.port;
    auto connection = std::make_shared<redis::connection>(executor, options);
    keep_until_drained(connection);
    auto [ec] = co_await connection->connect(with_error);
    if (ec) {
      last_error = "cannot connect to Redis at " + address_text(address) + ": " + ec.message();
      if (addresses.size() > 1) detail::log(log_level::warning, last_error);
    } else {
      ++connected;
    }
    connections.push_back(std::move(connection));  // a failed master keeps reconnecting in the background
  }
  if (connected <= addresses.size() / 2)
    throw failure(addresses.size() == 1 ? last_error : "cannot connect to a majority of the Redis masters");
  co_return connections;
}

}  // namespace dlock::cli
