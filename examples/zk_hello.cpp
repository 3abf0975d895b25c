// Connects to ZooKeeper, creates a node, lists its parent, deletes it.
// DLOCK_ZK_HOSTS picks the servers (default 127.0.0.1:2181).
#include <dlock/zk/client.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace asio = boost::asio;
namespace zk = dlock::zk;

asio::awaitable<void> hello(zk::client& client) {
  co_await client.connect();
  std::printf("connected to %s, session 0x%llx\n", client.current_server().c_str(),
              static_cast<unsigned long long>(client.session_id()));

  std::string path = "/dlock-hello-" + std::to_string(::getpid());
  auto made = co_await client.create(path, "hello from dlock", zk::create_mode::ephemeral);
  std::printf("created %s\n", made.path.c_str());

  auto [children, parent] = co_await client.get_children("/");
  std::printf("/ has %zu children:", children.size());
  for (auto& name : children) std::printf(" %s", name.c_str());
  std::printf("\n");

  co_await client.remove(path);
  std::printf("deleted %s\n", path.c_str());
  co_await client.close();
}

int main() {
  const char* hosts = std::getenv("DLOCK_ZK_HOSTS");
  zk::options options;
  options.hosts = hosts && *hosts ? hosts : "127.0.0.1:2181";
  options.connect_timeout = std::chrono::seconds(10);

  asio::io_context io;
  zk::client client(io.get_executor(), options);
  int status = 0;
  asio::co_spawn(io, hello(client), [&](std::exception_ptr failure) {
    if (!failure) return;
    status = 1;
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "zk_hello: %s\n", e.what());
    }
  });
  io.run();
  return status;
}
