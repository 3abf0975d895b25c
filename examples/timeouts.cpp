// Five ways to stop waiting for a lock that someone else holds:
//   1. try_acquire(): one attempt, `dlock::error::taken` at once;
//   2. acquire_for(d): the lock's own limit, `dlock::error::timed_out`;
//   3. any acquire with a cancellation slot that a steady_timer emits on
//      (Boost 1.81 has no asio::cancel_after): `operation_aborted`;
//   4. `acquire() || timer` with Asio's awaitable operators: whichever ends
//      first cancels the other;
//   5. with Boost 1.86 or later, asio::cancel_after: 3. in one token.
// A cancelled or timed-out acquire leaves no node behind. Errors are read as
// values with `asio::as_tuple`, so nothing throws. Exits 0 when every wait
// ended the expected way, and a last acquire succeeds once the holder lets go.
#include "example_support.hpp"

#include <dlock/error.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/mutex.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/version.hpp>
#if BOOST_ASIO_VERSION >= 103100  // Asio 1.31, Boost 1.86
#include <boost/asio/cancel_after.hpp>
#endif

#include <cstdio>
#include <string>
#include <variant>

namespace asio = boost::asio;
namespace zk = dlock::zk;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using dlock::error_code;

void report(const char* how, error_code ec, error_code expected) {
  std::printf("%-36s -> %s\n", how, ec ? ec.message().c_str() : "acquired");
  example::check(ec == expected, std::string(how) + " ended with " + ec.message());
}

asio::awaitable<void> with_try(zk::mutex& m) {
  auto [ec] = co_await m.try_acquire(asio::as_tuple(asio::deferred));
  report("try_acquire()", ec, dlock::error::taken);
}

asio::awaitable<void> with_acquire_for(zk::mutex& m) {
  auto [ec] = co_await m.acquire_for(200ms, asio::as_tuple(asio::deferred));
  report("acquire_for(200ms)", ec, dlock::error::timed_out);
}

// A timer emits on a cancellation signal; the acquire listens on its slot.
// This works for every dlock operation, not only locks.
asio::awaitable<void> with_timer_and_signal(zk::mutex& m) {
  asio::cancellation_signal give_up;
  asio::steady_timer timer(co_await asio::this_coro::executor, 200ms);
  timer.async_wait([&give_up](error_code ec) {
    if (!ec) give_up.emit(asio::cancellation_type::terminal);
  });
  auto [ec] = co_await m.acquire(asio::bind_cancellation_slot(give_up.slot(), asio::as_tuple(asio::use_awaitable)));
  timer.cancel();  // the acquire may have ended first
  report("acquire() + timer-bound slot", ec, asio::error::operation_aborted);
}

// `a || b` runs both and cancels the loser. The result's index says who won.
asio::awaitable<void> with_operator_or(zk::mutex& m) {
  asio::steady_timer timer(co_await asio::this_coro::executor, 200ms);
  auto winner = co_await (m.acquire(asio::use_awaitable) || timer.async_wait(asio::use_awaitable));
  bool timed_out = winner.index() == 1;
  report("acquire() || timer", timed_out ? error_code(dlock::error::timed_out) : error_code(),
         dlock::error::timed_out);
}

#if BOOST_ASIO_VERSION >= 103100
// The timer and signal of with_timer_and_signal, in one token.
asio::awaitable<void> with_cancel_after(zk::mutex& m) {
  auto [ec] = co_await m.acquire(asio::cancel_after(200ms, asio::as_tuple(asio::deferred)));
  report("acquire(cancel_after(200ms))", ec, asio::error::operation_aborted);
}
#endif

// The holder lets go after `hold`; a patient acquire_for then succeeds.
asio::awaitable<void> release_later(zk::mutex* holder, std::chrono::milliseconds hold) {
  co_await example::sleep_for(hold);
  co_await holder->release();
}

asio::awaitable<void> example_main() {
  auto executor = co_await asio::this_coro::executor;
  zk::client zk(executor, example::zk_options());
  co_await zk.connect();
  auto path = example::unique("/dlock-examples/timeouts");
  zk::mutex holder(zk, path);
  zk::mutex waiter(zk, path);  // a second contender (same session: still a separate node)
  co_await holder.acquire();

  co_await with_try(waiter);
  co_await with_acquire_for(waiter);
  co_await with_timer_and_signal(waiter);
  co_await with_operator_or(waiter);
#if BOOST_ASIO_VERSION >= 103100
  co_await with_cancel_after(waiter);
#endif

  asio::co_spawn(executor, release_later(&holder, 100ms), asio::detached);
  auto [ec] = co_await waiter.acquire_for(5s, asio::as_tuple(asio::deferred));
  report("acquire_for(5s), holder leaves", ec, error_code());
  co_await waiter.release();
  co_await zk.close();
}

int main() { return example::run("timeouts", example_main); }
