// The headers nearly every test program includes, precompiled once for all
// of them (test/CMakeLists.txt): parsing Boost.Test and Asio's coroutine
// support is most of a test file's compile time. Only stable third-party
// headers here, so that changing dlock's own headers does not rebuild it.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>
