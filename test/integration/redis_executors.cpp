// Where completions run. A reply may resume its waiter in place only when
// the waiter's executor is the one the object runs on; a handler bound to
// another executor (or a strand) completes there, and a plain callback on
// the object's own executor.
#include "redis_support.hpp"

#include <dlock/redis/connection.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using dlock::error_code;
using redis_test::master_options;

namespace {

constexpr int rounds = 20;

// Counts completions by where they ran.
struct tally {
  asio::io_context& own;  // the object's io_context
  asio::io_context& other;
  int on_own = 0, on_other = 0, wrong = 0;

  // A callback with no executor of its own: on the object's.
  auto plain() {
    return [this](error_code ec, auto&&...) {
      (!ec && own.get_executor().running_in_this_thread() ? on_own : wrong)++;
    };
  }
  // Bound to the other io_context: there, never in place on the object's.
  auto bound() {
    return asio::bind_executor(other.get_executor(), [this](error_code ec, auto&&...) {
      bool there = other.get_executor().running_in_this_thread() && !own.get_executor().running_in_this_thread();
      (!ec && there ? on_other : wrong)++;
    });
  }
};

// Runs both io_contexts on this thread, one handler at a time, until `done`.
void run_until(asio::io_context& a, asio::io_context& b, const std::function<bool()>& done) {
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done() && std::chrono::steady_clock::now() < give_up) {
    a.poll_one();
    b.poll_one();
    a.restart();
    b.restart();
  }
  BOOST_REQUIRE_MESSAGE(done(), "timed out waiting for the completions");
}

std::shared_ptr<redis::connection> connected(asio::io_context& io, asio::io_context& other, std::size_t master = 0) {
  auto c = std::make_shared<redis::connection>(io.get_executor(), master_options(master));
  bool ready = false;
  c->connect([&](error_code ec) {
    BOOST_REQUIRE(!ec);
    ready = true;
  });
  run_until(io, other, [&] { return ready; });
  return c;
}

void close_all(asio::io_context& io, asio::io_context& other, std::vector<std::shared_ptr<redis::connection>> cs) {
  for (auto& c : cs) c->close();
  run_until(io, other, [&] {
    for (auto& c : cs)
      if (c->state() != redis::connection_state::closed) return false;
    return true;
  });
}

// `mine` completes plain callbacks, `theirs` callbacks bound to `other`.
template <class Lock>
void acquire_and_release(asio::io_context& io, asio::io_context& other, Lock& mine, Lock& theirs) {
  tally t{io, other};
  auto completed = [&] { return t.on_own + t.on_other + t.wrong; };
  for (int i = 0; i < rounds; ++i) {
    int before = completed();
    mine.try_acquire(t.plain());
    theirs.try_acquire(t.bound());
    run_until(io, other, [&] { return completed() == before + 2; });
    mine.release(t.plain());
    theirs.release(t.bound());
    run_until(io, other, [&] { return completed() == before + 4; });
  }
  BOOST_CHECK_EQUAL(t.wrong, 0);
  BOOST_CHECK_EQUAL(t.on_own, 2 * rounds);
  BOOST_CHECK_EQUAL(t.on_other, 2 * rounds);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_executors)

BOOST_AUTO_TEST_CASE(exec_completes_on_the_handlers_executor) {
  asio::io_context io, other;
  auto c = connected(io, other);
  tally t{io, other};
  for (int i = 0; i < rounds; ++i) {
    c->exec(redis::command("PING"), t.plain());
    c->exec(redis::command("PING"), t.bound());
  }
  run_until(io, other, [&] { return t.on_own + t.on_other + t.wrong == 2 * rounds; });
  BOOST_CHECK_EQUAL(t.wrong, 0);
  BOOST_CHECK_EQUAL(t.on_own, rounds);
  BOOST_CHECK_EQUAL(t.on_other, rounds);
  close_all(io, other, {c});
}

BOOST_AUTO_TEST_CASE(lock_completes_on_the_handlers_executor) {
  asio::io_context io, other;
  auto c = connected(io, other);
  redis::lock mine(*c, dlock::test::unique_name("exec-lock-own"));
  redis::lock theirs(*c, dlock::test::unique_name("exec-lock-other"));
  acquire_and_release(io, other, mine, theirs);
  close_all(io, other, {c});
}

BOOST_AUTO_TEST_CASE(redlock_completes_on_the_handlers_executor) {
  asio::io_context io, other;
  std::vector<std::shared_ptr<redis::connection>> masters;
  for (std::size_t i = 0; i < 3; ++i) masters.push_back(connected(io, other, i));
  redis::redlock mine(io.get_executor(), masters, dlock::test::unique_name("exec-redlock-own"));
  redis::redlock theirs(io.get_executor(), masters, dlock::test::unique_name("exec-redlock-other"));
  acquire_and_release(io, other, mine, theirs);
  close_all(io, other, masters);
}

// The masters' connections run on one io_context, the redlock on another:
// the answers cross over to the redlock's.
BOOST_AUTO_TEST_CASE(redlock_on_another_executor_than_its_masters) {
  asio::io_context io, other;
  std::vector<std::shared_ptr<redis::connection>> masters;
  for (std::size_t i = 0; i < 3; ++i) masters.push_back(connected(io, other, i));
  tally t{other, io};  // the redlock's own io_context is `other`
  redis::redlock lock(other.get_executor(), masters, dlock::test::unique_name("exec-redlock-cross"));
  for (int i = 0; i < rounds; ++i) {
    int before = t.on_own + t.on_other + t.wrong;
    lock.try_acquire(t.plain());
    run_until(io, other, [&] { return t.on_own + t.on_other + t.wrong == before + 1; });
    lock.release(t.bound());
    run_until(io, other, [&] { return t.on_own + t.on_other + t.wrong == before + 2; });
  }
  BOOST_CHECK_EQUAL(t.wrong, 0);
  BOOST_CHECK_EQUAL(t.on_own, rounds);
  BOOST_CHECK_EQUAL(t.on_other, rounds);
  close_all(io, other, masters);
}

BOOST_AUTO_TEST_SUITE_END()
