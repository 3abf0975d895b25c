// dlock::detail::spawn_to_handler, which runs a recipe's coroutine for a
// completion handler: results, exceptions, and the caller's cancellation slot.
// No sockets.
#include "detail/spawn_to_handler.hpp"

#include "common/asio_handler_cache.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <tuple>

namespace asio = boost::asio;
using dlock::error_code;
using result = std::tuple<error_code, int>;

namespace {

// One hop through the coroutine's executor, then a value: a recipe that
// ignores cancellation.
asio::awaitable<result> one_hop(int value) {
  co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  co_return result{error_code{}, value};
}

asio::awaitable<result> throws() {
  co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  throw std::runtime_error("the recipe failed");
}

// Waits up to a minute; a cancellation ends the wait with operation_aborted.
asio::awaitable<result> long_wait() {
  asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::minutes(1));
  auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return result{ec, 0};
}

template <class Handler>
void spawn(const asio::any_io_executor& executor, asio::awaitable<result> body, Handler handler) {
  dlock::detail::spawn_to_handler<int>(executor, std::move(body),
                                       asio::any_completion_handler<void(error_code, int)>(std::move(handler)));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(spawn_to_handler)

BOOST_AUTO_TEST_CASE(the_coroutines_result_reaches_the_handler) {
  asio::io_context io;
  std::optional<result> got;
  spawn(io.get_executor(), one_hop(7),
                                       [&](error_code ec, int v) { got = result{ec, v}; });
  io.run();
  BOOST_REQUIRE(got.has_value());
  BOOST_TEST(!std::get<0>(*got));
  BOOST_TEST(std::get<1>(*got) == 7);
}

BOOST_AUTO_TEST_CASE(an_exception_becomes_an_error_code) {
  asio::io_context io;
  std::optional<error_code> got;
  spawn(io.get_executor(), throws(), [&](error_code ec, int) { got = ec; });
  io.run();
  BOOST_REQUIRE(got.has_value());
  BOOST_TEST(!!*got);
}

BOOST_AUTO_TEST_CASE(the_slots_signal_reaches_the_coroutine) {
  asio::io_context io;
  asio::cancellation_signal signal;
  std::optional<error_code> got;
  spawn(io.get_executor(), long_wait(),
                                       asio::bind_cancellation_slot(signal.slot(), [&](error_code ec, int) { got = ec; }));
  asio::post(io, [&] { signal.emit(asio::cancellation_type::terminal); });
  io.run_for(std::chrono::seconds(10));
  BOOST_REQUIRE(got.has_value());
  BOOST_TEST((*got == asio::error::operation_aborted), got->message());
}

// A signal emitted outside the coroutine's strand is forwarded into it later.
// If the operation completes first and its caller destroys the signal at
// once (a timer racing an operation, README pattern 2), the forward must
// find the operation done, not the signal's freed memory. Asio 1.81's own
// forward keeps a raw pointer into the slot's memory (ASan: use after free).
BOOST_AUTO_TEST_CASE(a_signal_destroyed_as_the_operation_completes_is_not_used_later) {
  asio::io_context io;
  auto strand = asio::make_strand(io);
  auto signal = std::make_unique<asio::cancellation_signal>();
  std::optional<result> got;
  // The handler runs on the io_context, outside the strand, and destroys the
  // signal (freed to the heap, where ASan sees a later use).
  auto on_done = [&](error_code ec, int v) {
    got = result{ec, v};
    dlock::test::fill_asios_handler_cache();
    signal.reset();
  };
  spawn(
      strand, one_hop(3),
      asio::bind_cancellation_slot(signal->slot(), asio::bind_executor(io.get_executor(), std::move(on_done))));
  // Queued behind the coroutine's first step: emitted while the coroutine's
  // last hop is already queued on the strand, so its forward comes after it.
  asio::post(io, [&] {
    if (signal) signal->emit(asio::cancellation_type::terminal);
  });
  io.run();
  BOOST_REQUIRE(got.has_value());
  BOOST_TEST(!signal);
  BOOST_TEST(std::get<1>(*got) == 3);  // the coroutine ignores cancellation: its value arrives
}

// An emission after the completion (the caller kept its signal) does nothing.
BOOST_AUTO_TEST_CASE(a_signal_emitted_after_completion_is_ignored) {
  asio::io_context io;
  asio::cancellation_signal signal;
  int calls = 0;
  spawn(io.get_executor(), one_hop(1),
                                       asio::bind_cancellation_slot(signal.slot(), [&](error_code, int) { ++calls; }));
  io.run();
  signal.emit(asio::cancellation_type::terminal);
  io.restart();
  io.run();
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_SUITE_END()
