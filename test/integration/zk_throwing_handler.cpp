// A completion handler that throws, on ZooKeeper. The session delivers the
// replies of one drain of the C client in place; Asio lets a handler's
// exception leave io_context::run(), and the application may call run()
// again. The session must then go on reading its socket: a watch event (which
// no request of ours kicks) must come when the server sends it, not at the
// driver's next timer step (a third of the session timeout later).
// Callback handlers, not coroutines: a coroutine's exception stays in its frame.
#include "zk_client_support.hpp"

#include <dlock/zk/client.hpp>
#include <dlock/zk/watch.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace asio = boost::asio;
namespace zk = dlock::zk;
using dlock::error_code;
using namespace std::chrono_literals;

namespace {

struct thrown_by_handler : std::runtime_error {
  thrown_by_handler() : std::runtime_error("thrown by a completion handler") {}
};

// Runs `io` one handler at a time until `done` or `limit`; what a handler
// throws leaves here, as it leaves io_context::run(). True if `done`.
bool run_until(asio::io_context& io, const std::function<bool()>& done,
               std::chrono::steady_clock::duration limit = dlock::test::patience) {
  auto give_up = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < give_up) {
    io.restart();
    io.run_one_for(std::chrono::milliseconds(20));
  }
  return done();
}

void run_until_the_throw(asio::io_context& io) {
  bool thrown = false;
  try {
    run_until(io, [] { return false; });
  } catch (const thrown_by_handler&) {
    thrown = true;
  }
  BOOST_REQUIRE_MESSAGE(thrown, "the handler's exception never left io_context::run()");
}

void connect(asio::io_context& io, zk::client& c) {
  std::optional<error_code> result;
  c.connect([&](error_code ec) { result = ec; });
  BOOST_REQUIRE(run_until(io, [&] { return result.has_value(); }));
  BOOST_REQUIRE_MESSAGE(!*result, "connect: " << result->message());
}

void close(asio::io_context& io, zk::client& c) {
  bool closed = false;
  c.close([&](error_code) { closed = true; });
  BOOST_CHECK(run_until(io, [&] { return closed; }));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_throwing_handler)

BOOST_AUTO_TEST_CASE(a_throwing_handler_leaves_the_session_reading) {
  asio::io_context io;
  zk::client watcher(io.get_executor(), dlock::test::zk_options(dlock::test::zk_hosts()));
  zk::client creator(io.get_executor(), dlock::test::zk_options(dlock::test::zk_hosts()));
  connect(io, watcher);
  connect(io, creator);
  auto path = "/" + dlock::test::unique_name("zk-throwing-handler");

  zk::watch w;
  std::optional<error_code> armed;
  watcher.exists(path, w, [&](error_code ec, std::optional<zk::stat>) { armed = ec; });
  BOOST_REQUIRE(run_until(io, [&] { return armed.has_value(); }));
  BOOST_REQUIRE(!*armed);

  watcher.exists("/", [](error_code, std::optional<zk::stat>) { throw thrown_by_handler(); });
  run_until_the_throw(io);

  std::optional<error_code> fired;
  w.wait([&](error_code ec, zk::watch_event) { fired = ec; });
  std::optional<error_code> made;
  creator.create(path, "", zk::create_mode::ephemeral, [&](error_code ec, zk::created) { made = ec; });
  BOOST_REQUIRE(run_until(io, [&] { return made.has_value(); }));
  BOOST_REQUIRE_MESSAGE(!*made, "create: " << made->message());
  // Not a timing check of speed: the event comes in milliseconds when the
  // socket is read, and only at the driver's timer step (a third of the
  // session timeout after the last one) when it is not.
  auto soon = watcher.negotiated_session_timeout() / 6;
  BOOST_CHECK_MESSAGE(run_until(io, [&] { return fired.has_value(); }, soon),
                      "the watch event did not come within " << soon.count() << " ms of the create");
  BOOST_REQUIRE(run_until(io, [&] { return fired.has_value(); }));
  BOOST_CHECK(!*fired);

  // And requests still work.
  std::optional<error_code> found;
  watcher.exists(path, [&](error_code ec, std::optional<zk::stat> st) {
    found = ec;
    BOOST_CHECK(st.has_value());
  });
  BOOST_REQUIRE(run_until(io, [&] { return found.has_value(); }));
  BOOST_CHECK(!*found);
  close(io, creator);
  close(io, watcher);
}

BOOST_AUTO_TEST_SUITE_END()
