// The compiled core shared by the ZooKeeper lock front ends: one lock object's
// state on the client's strand, and the non-template functions the
// initiating functions hand their completion handlers to.
#pragma once

#include <dlock/config.hpp>
#include <dlock/lock_loss.hpp>
#include <dlock/zk/detail/lock_options.hpp>
#include <dlock/zk/detail/lock_role.hpp>

#include <boost/asio/any_completion_handler.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dlock::zk {
class client;
}

namespace dlock::zk::detail {

class lock_core;
using lock_core_ptr = std::shared_ptr<lock_core>;

enum class lock_flavor {
  sequential,  ///< the recipe: ephemeral-sequential node, wait for the predecessor
  simple,      ///< one ephemeral node at the path, watch it when taken (herd)
};

enum class acquire_mode { wait, try_once, wait_for };

lock_core_ptr make_lock_core(client& zk, std::string path, lock_role role, lock_flavor flavor,
                             lock_options options);
/// The lock object is going away: cancels an acquire, releases a hold in the
/// background, stops watching the session.
void close_lock_core(const lock_core_ptr& core) noexcept;

/// `identifier`, if not empty, replaces the lock's node data from this acquire on.
void start_acquire(const lock_core_ptr& core, acquire_mode mode, std::chrono::steady_clock::duration limit,
                   asio::any_completion_handler<void(error_code)> handler, std::string identifier = {});
void start_release(const lock_core_ptr& core, asio::any_completion_handler<void(error_code)> handler);
void start_participants(const lock_core_ptr& core,
                        asio::any_completion_handler<void(error_code, std::vector<std::string>)> handler);

asio::any_io_executor core_executor(const lock_core& core) noexcept;
bool core_held(const lock_core& core) noexcept;
std::int64_t core_fencing_token(const lock_core& core) noexcept;
std::string core_node_path(const lock_core& core);
const std::string& core_path(const lock_core& core) noexcept;
lock_loss& core_loss(lock_core& core) noexcept;

}  // namespace dlock::zk::detail
