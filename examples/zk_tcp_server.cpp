// An Asio TCP server whose connection handlers take a ZooKeeper mutex per
// resource: a client sends a resource name ("orders\n"), the handler locks
// that resource, works on it, unlocks it and answers. Several servers on
// several machines could share the same lock paths; here one server and a
// few clients on loopback are enough to see the handlers queue per resource.
//
// The server shares one `zk::client` (one session) between all handlers; each
// handler owns its own `zk::mutex` object (a mutex object is one contender).
// Runs by itself: the clients are started by the example, which then stops
// the server and exits 0, or 1 if two handlers ever worked on one resource.
#include "example_support.hpp"

#include <dlock/zk/client.hpp>
#include <dlock/zk/mutex.hpp>

#include <boost/asio/buffer.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>

#include <cstdio>
#include <map>
#include <string>

namespace asio = boost::asio;
namespace zk = dlock::zk;
using asio::ip::tcp;
using namespace std::chrono_literals;

// What the server knows about its own handlers, to check mutual exclusion.
struct server_state {
  zk::client* zk = nullptr;
  std::string lock_root;
  std::map<std::string, int> working;  // handlers inside each resource's critical section
  int overlaps = 0;
  int connections = 0;
};

// The critical section: at most one handler per resource, in any process.
asio::awaitable<std::string> work_on(server_state& state, std::string resource, int connection) {
  zk::mutex lock(*state.zk, state.lock_root + "/" + resource);
  co_await lock.acquire();
  if (++state.working[resource] > 1) ++state.overlaps;
  co_await example::sleep_for(100ms);  // the work itself
  --state.working[resource];
  auto token = lock.fencing_token();   // what a real handler would pass to its storage
  co_await lock.release();
  co_return resource + " done by connection " + std::to_string(connection) + " under fencing token " +
      std::to_string(token) + "\n";
}

// One connection: read a resource name, answer when its work is done.
asio::awaitable<void> handle(tcp::socket socket, server_state& state) {
  int connection = ++state.connections;
  std::string line;
  auto length = co_await asio::async_read_until(socket, asio::dynamic_buffer(line), '\n', asio::deferred);
  std::string answer = co_await work_on(state, line.substr(0, length - 1), connection);
  co_await asio::async_write(socket, asio::buffer(answer), asio::deferred);
}

// Accepts until the acceptor is closed; each connection gets its own coroutine.
asio::awaitable<void> serve(tcp::acceptor& acceptor, server_state& state) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::deferred));
    if (ec) co_return;  // closed: the example is over
    asio::co_spawn(acceptor.get_executor(), handle(std::move(socket), state), asio::detached);
  }
}

// A client: asks for `resource`, prints the answer.
asio::awaitable<void> ask(tcp::endpoint server, std::string resource) {
  tcp::socket socket(co_await asio::this_coro::executor);
  co_await socket.async_connect(server, asio::deferred);
  std::string request = resource + "\n";
  co_await asio::async_write(socket, asio::buffer(request), asio::deferred);
  std::string answer;
  co_await asio::async_read_until(socket, asio::dynamic_buffer(answer), '\n', asio::deferred);
  std::printf("client asked for %-6s -> %s", resource.c_str(), answer.c_str());
}

asio::awaitable<void> example_main() {
  auto executor = co_await asio::this_coro::executor;
  zk::client zk(executor, example::zk_options());
  co_await zk.connect();
  server_state state;
  state.zk = &zk;
  state.lock_root = example::unique("/dlock-examples/tcp-server");

  tcp::acceptor acceptor(executor, tcp::endpoint(asio::ip::address_v4::loopback(), 0));  // any free port
  asio::co_spawn(executor, serve(acceptor, state), asio::detached);

  // Six clients at once, three per resource: each resource's work is serialized.
  std::vector<asio::awaitable<void>> clients;
  for (const char* resource : {"orders", "users", "orders", "users", "orders", "users"})
    clients.push_back(ask(acceptor.local_endpoint(), resource));
  co_await example::all_of(std::move(clients));

  acceptor.close();
  co_await zk.close();
  example::check(state.overlaps == 0, "never two handlers inside one resource");
  std::printf("6 requests served, never two handlers on one resource at once\n");
}

int main() { return example::run("zk_tcp_server", example_main); }
