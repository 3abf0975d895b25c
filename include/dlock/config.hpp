/// @file
/// Names every dlock header uses.
#pragma once

#include <dlock/detail/require_cxx20.hpp>

#include <boost/asio/deferred.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

/// Distributed locks and coordination over ZooKeeper and Redis.
namespace dlock {

namespace asio = boost::asio;  ///< Boost.Asio, as every dlock header names it
using boost::system::error_code;  ///< the error type of every dlock operation

/// The completion token every dlock operation uses when none is given:
/// `co_await op()` inside an `asio::awaitable` works, and so does passing
/// `asio::use_awaitable`, `asio::use_future`, a callback or `asio::deferred`.
using default_token = asio::deferred_t;

}  // namespace dlock
