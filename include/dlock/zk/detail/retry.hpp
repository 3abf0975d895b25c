// The retry policy of the ZooKeeper recipes, as their options name it. The
// decisions made with it (what is retried, the backoff) are compiled:
// src/zk/recipe/retry.hpp.
#pragma once

#include <dlock/detail/require_cxx20.hpp>

#include <chrono>

namespace dlock::zk::detail {

/// Bounded retries of recoverable errors, with exponential backoff.
struct retry_policy {
  int max_attempts = 8;  ///< retries after the first try (a failure beyond them is reported)
  std::chrono::milliseconds initial_backoff{20};  ///< the wait before the first retry
  std::chrono::milliseconds max_backoff{1000};    ///< no nominal wait is longer
};

}  // namespace dlock::zk::detail

namespace dlock::zk {
/// Retries of recoverable errors (connection loss): locks, election, queue.
using retry_policy = detail::retry_policy;
}  // namespace dlock::zk
