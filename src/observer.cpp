#include <dlock/observer.hpp>

namespace dlock {

std::string_view to_string(lock_kind kind) noexcept {
  switch (kind) {
    case lock_kind::zk_mutex: return "zk_mutex";
    case lock_kind::zk_read_lock: return "zk_read_lock";
    case lock_kind::zk_write_lock: return "zk_write_lock";
    case lock_kind::zk_simple_lock: return "zk_simple_lock";
    case lock_kind::zk_semaphore: return "zk_semaphore";
    case lock_kind::redis_lock: return "redis_lock";
    case lock_kind::redis_semaphore: return "redis_semaphore";
    case lock_kind::redlock: return "redlock";
  }
  return "unknown";
}

}  // namespace dlock
