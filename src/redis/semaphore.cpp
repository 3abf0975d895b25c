// redis::semaphore: a basic_hold (lock.cpp, lock_state.hpp) with the
// semaphore's commands (hold_commands.cpp, the scripts in engine/scripts.cpp)
// and the lock's options.
#include "lock_state.hpp"

#include <dlock/redis/semaphore.hpp>

namespace dlock::redis {

semaphore::semaphore(connection& conn, std::string key, std::size_t max_leases, semaphore_options opts)
    : basic_hold(std::make_shared<detail::lock_state>(detail::connection_access::impl(conn),
                                                      detail::hold_commands::semaphore(std::move(key), max_leases),
                                                      std::move(opts))) {}

std::size_t semaphore::max_leases() const noexcept { return state_->commands.max_leases; }
const semaphore_options& semaphore::options() const noexcept { return state_->opts; }

}  // namespace dlock::redis
