// A completion handler that throws. dlock runs a reply's handler in place,
// while its connection hands out the replies of one read; Asio lets the
// exception leave io_context::run(), and the application may call run()
// again. Every connection and lock must then still work: the one whose
// hand-out the exception cut short (it must read again), and the others on
// the same io_context whose writes waited for the end of that hand-out.
// Callback handlers, not coroutines: a coroutine's exception stays in its
// frame.
#include "redis_support.hpp"

#include <dlock/redis/connection.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using dlock::error_code;
using redis_test::master_options;

namespace {

struct thrown_by_handler : std::runtime_error {
  thrown_by_handler() : std::runtime_error("thrown by a completion handler") {}
};

// Runs `io` on this thread, one handler at a time, until `done`. What a
// handler throws leaves here, as it leaves io_context::run().
void run_until(asio::io_context& io, const std::function<bool()>& done) {
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done() && std::chrono::steady_clock::now() < give_up) {
    io.restart();
    io.run_one_for(std::chrono::milliseconds(50));
  }
  BOOST_REQUIRE_MESSAGE(done(), "timed out waiting for the completions");
}

// Runs `io` until a handler throws thrown_by_handler; fails if none does.
void run_until_the_throw(asio::io_context& io) {
  bool thrown = false;
  try {
    run_until(io, [] { return false; });
  } catch (const thrown_by_handler&) {
    thrown = true;
  }
  BOOST_REQUIRE_MESSAGE(thrown, "the handler's exception never left io_context::run()");
}

std::shared_ptr<redis::connection> connected(asio::io_context& io, std::size_t master = 0) {
  auto c = std::make_shared<redis::connection>(io.get_executor(), master_options(master));
  bool ready = false;
  c->connect([&](error_code ec) {
    BOOST_REQUIRE(!ec);
    ready = true;
  });
  run_until(io, [&] { return ready; });
  return c;
}

void close_all(asio::io_context& io, const std::vector<std::shared_ptr<redis::connection>>& cs) {
  for (auto& c : cs) c->close();
  run_until(io, [&] {
    for (auto& c : cs)
      if (c->state() != redis::connection_state::closed) return false;
    return true;
  });
}

// One command's outcome, once it came.
struct outcome {
  std::optional<error_code> ec;
  redis::reply answer;
  auto handler() {
    return [this](error_code e, redis::reply r) {
      ec = e;
      answer = std::move(r);
    };
  }
  bool came() const { return ec.has_value(); }
};

// `c` answers a round trip: SET then GET of `key`.
void serves_commands(asio::io_context& io, redis::connection& c, const std::string& key) {
  outcome set, get;
  c.exec(redis::command("SET", key, "v"), set.handler());
  c.exec(redis::command("GET", key), get.handler());
  run_until(io, [&] { return set.came() && get.came(); });
  BOOST_CHECK_MESSAGE(!*set.ec, "SET failed: " << set.ec->message());
  BOOST_CHECK_MESSAGE(!*get.ec, "GET failed: " << get.ec->message());
  BOOST_CHECK_EQUAL(get.answer.string(), "v");
}

// A lock's operation, its outcome.
struct step {
  std::optional<error_code> ec;
  auto handler() {
    return [this](error_code e) { ec = e; };
  }
};

template <class Lock>
void locks_and_releases(asio::io_context& io, Lock& l) {
  step acquired, released;
  l.try_acquire(acquired.handler());
  run_until(io, [&] { return acquired.ec.has_value(); });
  BOOST_REQUIRE_MESSAGE(!*acquired.ec, "acquire failed: " << acquired.ec->message());
  l.release(released.handler());
  run_until(io, [&] { return released.ec.has_value(); });
  BOOST_CHECK_MESSAGE(!*released.ec, "release failed: " << released.ec->message());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_throwing_handler)

// The reply's handler issues a command on a second connection of the same
// io_context (its write waits for the end of the first's hand-out), then
// throws. Both must go on: the first reads again, the second writes.
BOOST_AUTO_TEST_CASE(a_throwing_exec_handler_leaves_its_connection_and_the_deferred_one_working) {
  asio::io_context io;
  auto first = connected(io, 0);
  auto second = connected(io, 0);
  auto key = dlock::test::unique_name("throwing-exec");
  outcome deferred;
  first->exec(redis::command("PING"), [&](error_code ec, redis::reply) {
    BOOST_CHECK(!ec);
    second->exec(redis::command("SET", key + ":second", "deferred"), deferred.handler());
    throw thrown_by_handler();
  });
  run_until_the_throw(io);

  run_until(io, [&] { return deferred.came(); });
  BOOST_CHECK_MESSAGE(!*deferred.ec, "the deferred SET failed: " << deferred.ec->message());
  serves_commands(io, *first, key);
  serves_commands(io, *second, key + ":second");
  redis::lock on_first(*first, key + ":lock1"), on_second(*second, key + ":lock2");
  locks_and_releases(io, on_first);
  locks_and_releases(io, on_second);
  close_all(io, {first, second});
}

// Several replies in one read: the first handler throws, the others must
// still be handed out (they are already read: no more bytes will come).
BOOST_AUTO_TEST_CASE(replies_read_with_the_throwing_one_are_still_handed_out) {
  asio::io_context io;
  auto c = connected(io, 0);
  auto key = dlock::test::unique_name("throwing-batch");
  constexpr int later = 20;
  std::vector<outcome> others(later);
  c->exec(redis::command("PING"), [](error_code, redis::reply) { throw thrown_by_handler(); });
  for (auto& o : others) c->exec(redis::command("PING"), o.handler());
  run_until_the_throw(io);
  run_until(io, [&] {
    for (auto& o : others)
      if (!o.came()) return false;
    return true;
  });
  for (auto& o : others) BOOST_CHECK_MESSAGE(!*o.ec, "a later PING failed: " << o.ec->message());
  serves_commands(io, *c, key);
  close_all(io, {c});
}

// A lock's acquire handler throws: the lock is held, and its release, the
// next acquire and the connection's commands work.
BOOST_AUTO_TEST_CASE(a_throwing_lock_handler_leaves_the_lock_and_connection_working) {
  asio::io_context io;
  auto c = connected(io, 0);
  auto key = dlock::test::unique_name("throwing-lock");
  redis::lock l(*c, key);
  l.try_acquire([](error_code ec) {
    BOOST_CHECK(!ec);
    throw thrown_by_handler();
  });
  run_until_the_throw(io);
  BOOST_CHECK(l.held());
  step released;
  l.release(released.handler());
  run_until(io, [&] { return released.ec.has_value(); });
  BOOST_CHECK_MESSAGE(!*released.ec, "release failed: " << released.ec->message());
  locks_and_releases(io, l);
  serves_commands(io, *c, key + ":after");
  close_all(io, {c});
}

// The same for Redlock, whose deciding reply's hand-out leads to writes on
// the other masters' connections (the round's next commands, deferred
// behind it).
BOOST_AUTO_TEST_CASE(a_throwing_redlock_handler_leaves_every_master_working) {
  asio::io_context io;
  std::vector<std::shared_ptr<redis::connection>> masters;
  for (std::size_t i = 0; i < 3; ++i) masters.push_back(connected(io, i));
  auto key = dlock::test::unique_name("throwing-redlock");
  redis::redlock l(io.get_executor(), masters, key);
  l.try_acquire([](error_code ec) {
    BOOST_CHECK(!ec);
    throw thrown_by_handler();
  });
  run_until_the_throw(io);
  BOOST_CHECK(l.held());
  step released;
  l.release(released.handler());
  run_until(io, [&] { return released.ec.has_value(); });
  BOOST_CHECK_MESSAGE(!*released.ec, "release failed: " << released.ec->message());
  locks_and_releases(io, l);
  for (std::size_t i = 0; i < masters.size(); ++i) serves_commands(io, *masters[i], key + ":" + std::to_string(i));
  close_all(io, masters);
}

BOOST_AUTO_TEST_SUITE_END()

