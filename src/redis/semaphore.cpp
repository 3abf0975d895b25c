// redis::semaphore: a basic_hold (lock.cpp, lock_state.hpp) with the
// semaphore's commands (hold_commands.cpp, the scripts in engine/scripts.cpp).
#include "lock_state.hpp"

#include <dlock/redis/semaphore.hpp>

namespace dlock::redis {
namespace {

// The shell's options: the same names and meanings, no fencing.
lock_options shell_options(const semaphore_options& o) {
  lock_options l;
  l.ttl = o.ttl;
  l.wait = o.wait;
  l.retry_delay = o.retry_delay;
  l.retry_jitter = o.retry_jitter;
  l.drift_factor = o.drift_factor;
  l.drift_extra = o.drift_extra;
  l.auto_extend = o.auto_extend;
  l.extend_fraction = o.extend_fraction;
  l.max_hold = o.max_hold;
  l.fencing = false;
  l.observer = o.observer;
  return l;
}

}  // namespace

semaphore::semaphore(connection& conn, std::string key, std::size_t max_leases, semaphore_options opts)
    : basic_hold(std::make_shared<detail::lock_state>(detail::connection_access::impl(conn),
                                                      detail::hold_commands::semaphore(std::move(key), max_leases),
                                                      shell_options(opts))),
      opts_(opts) {}

std::size_t semaphore::max_leases() const noexcept { return state_->commands.max_leases; }
const semaphore_options& semaphore::options() const noexcept { return opts_; }

}  // namespace dlock::redis
