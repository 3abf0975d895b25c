// What a ZooKeeper lock node contends as: named by the lock front ends
// (mutex, shared_mutex), decided on by the recipe (src/zk/locks/).
#pragma once

#include <dlock/detail/require_cxx20.hpp>

namespace dlock::zk::detail {

/// How a contender decides whether it holds the lock.
enum class lock_role { exclusive, reader, writer };

}  // namespace dlock::zk::detail
