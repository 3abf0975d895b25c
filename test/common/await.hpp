// Small awaitable helpers shared by tests and the chaos workers (no
// Boost.Test here: the chaos program links without it).
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <chrono>

namespace dlock::test {

/// The completion token of a step whose error the test looks at itself:
/// `auto [ec, ...] = co_await op(with_ec);` never throws.
inline constexpr auto with_ec = boost::asio::as_tuple(boost::asio::deferred);

/// Waits `d` on a timer (the io_context keeps running meanwhile); a
/// cancelled wait just ends early.
inline boost::asio::awaitable<void> sleep_for(std::chrono::steady_clock::duration d) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, d);
  co_await timer.async_wait(with_ec);
}

}  // namespace dlock::test
