// Running CMD while a lock is held: forward signals, stop CMD if the lock is lost.
#pragma once

#include "dlock/child_process.hpp"

#include <dlock/lock_loss.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/signal_set.hpp>

#include <chrono>

namespace dlock::cli {

/// Waits for the started `child` to exit while
///  - every signal caught by `forwarded` is sent on to it, and
///  - if `loss` fires, it gets SIGTERM, then SIGKILL `grace` later.
/// Returns the status dlock exits with (121 if the lock was lost, else CMD's).
asio::awaitable<int> supervise(child_process& child, lock_loss& loss, asio::signal_set& forwarded,
                               std::chrono::milliseconds grace);

}  // namespace dlock::cli
