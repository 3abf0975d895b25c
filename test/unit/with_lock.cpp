// dlock::with_lock's cancellation, over an in-memory lock that completes at
// once: the caller's signal reaches the body, and a signal destroyed as the
// operation completes is never used. No sockets (the servers' cases are in
// test/integration/with_lock.cpp).
#include <dlock/lock_loss.hpp>
#include <dlock/with_lock.hpp>

#include "common/asio_handler_cache.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>

namespace asio = boost::asio;
using dlock::error_code;

namespace {

/// A lock that is always free: acquire and release complete on the next turn
/// of the handler's own executor (with_lock's strand).
/// `on_release` runs as the release starts.
struct free_lock {
  explicit free_lock(asio::any_io_executor e) : executor(std::move(e)), lost(executor) {}

  asio::any_io_executor executor;
  dlock::lock_loss lost;
  std::function<void()> on_release;
  std::function<void()> on_acquire;  // once the success is queued

  template <class Token>
  auto acquire(Token&& token) {
    return asio::async_initiate<Token, void(error_code)>(
        [this](auto handler) {
          asio::post(asio::append(std::move(handler), error_code{}));
          if (on_acquire) on_acquire();
        },
        token);
  }
  template <class Token>
  auto release(Token&& token) {
    return asio::async_initiate<Token, void(error_code)>(
        [this](auto handler) {
          if (on_release) on_release();
          asio::post(asio::append(std::move(handler), error_code{}));
        },
        token);
  }
  dlock::lock_loss& loss() { return lost; }
  asio::any_io_executor get_executor() const { return executor; }
};
static_assert(dlock::basic_lockable<free_lock>);

asio::awaitable<int> returns_three() {
  co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  co_return 3;
}

asio::awaitable<int> waits_a_minute() {
  asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::minutes(1));
  co_await timer.async_wait(asio::use_awaitable);  // throws operation_aborted when cancelled
  co_return 0;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(with_lock_cancellation)

BOOST_AUTO_TEST_CASE(the_callers_signal_cancels_the_body) {
  asio::io_context io;
  free_lock lock(io.get_executor());
  asio::cancellation_signal signal;
  std::optional<std::exception_ptr> got;
  auto body = [] { return waits_a_minute(); };
  dlock::with_lock(lock, body, asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, int) { got = e; }));
  asio::steady_timer later(io, std::chrono::milliseconds(20));
  later.async_wait([&](error_code) { signal.emit(asio::cancellation_type::terminal); });
  io.run_for(std::chrono::seconds(10));
  BOOST_REQUIRE(got.has_value());
  BOOST_TEST(!!*got);  // the body's operation_aborted, after the release
}

// The caller cancels just after the acquire succeeded, before with_lock has
// seen it: the body does not run, but the lock is released all the same (it
// stayed held before: the cancellation threw at the next step).
BOOST_AUTO_TEST_CASE(a_cancellation_after_the_acquire_still_releases) {
  asio::io_context io;
  free_lock lock(io.get_executor());
  asio::cancellation_signal signal;
  lock.on_acquire = [&] { signal.emit(asio::cancellation_type::terminal); };
  int releases = 0;
  lock.on_release = [&] { ++releases; };
  bool body_ran = false;
  auto body = [&body_ran] {
    body_ran = true;
    return returns_three();
  };
  std::optional<std::exception_ptr> got;
  dlock::with_lock(lock, body, asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, int) { got = e; }));
  io.run_for(std::chrono::seconds(10));
  BOOST_REQUIRE(got.has_value());
  BOOST_TEST(!!*got);  // operation_aborted
  BOOST_TEST(!body_ran);
  BOOST_TEST(releases == 1);
}

// Posts `f` to `io` after `hops` more turns of it.
void post_after(asio::io_context& io, int hops, std::function<void()> f) {
  if (hops == 0) return asio::post(io, std::move(f));
  asio::post(io, [&io, hops, f = std::move(f)]() mutable { post_after(io, hops - 1, std::move(f)); });
}

// The caller's signal is emitted outside with_lock's strand around the time
// the release completes there, and the caller destroys the signal as soon as
// its handler runs. A forward of that signal that reaches the strand after
// the completion must find the operation done, not the signal's freed memory
// (Asio 1.81's co_spawn keeps a raw pointer: a use after free). Which turn
// falls just after the completion depends on Asio's internals: every one
// from the release's start on is tried.
BOOST_AUTO_TEST_CASE(a_signal_destroyed_as_the_operation_completes_is_not_used_later) {
  for (int hops = 0; hops < 6; ++hops) {
    BOOST_TEST_CONTEXT("the signal emitted " << hops << " turns after the release starts") {
      asio::io_context io;
      free_lock lock(io.get_executor());
      auto signal = std::make_unique<asio::cancellation_signal>();
      lock.on_release = [&] {
        post_after(io, hops, [&] {  // on the io_context, not the strand
          if (signal) signal->emit(asio::cancellation_type::terminal);
        });
      };
      std::optional<int> got;
      auto on_done = [&](std::exception_ptr e, int v) {
        BOOST_TEST(!e);
        got = v;
        dlock::test::fill_asios_handler_cache();
        signal.reset();
      };
      auto body = [] { return returns_three(); };
      dlock::with_lock(
          lock, body,
          asio::bind_cancellation_slot(signal->slot(), asio::bind_executor(io.get_executor(), std::move(on_done))));
      io.run();
      BOOST_REQUIRE(got.has_value());
      BOOST_TEST(*got == 3);  // the release ignores cancellation, the body had returned
      BOOST_TEST(!signal);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
