// The simplest ZooKeeper lock: one ephemeral node at the lock path.
#pragma once

#include <dlock/zk/mutex.hpp>

namespace dlock::zk {

/// The first lock of the ZooKeeper seeds: acquiring creates the lock path
/// itself as an ephemeral node; when it exists, the acquirer watches it and
/// tries again once it is deleted.
///
/// **Not fair** (whoever retries first wins) and **with the herd effect**
/// (every waiter wakes on each release). Use it for low contention, or to
/// compare; prefer `zk::mutex` otherwise. Same interface and guarantees as
/// `zk::mutex` otherwise: fencing token (the node's czxid), loss signal,
/// cancellation that deletes a node created after the cancel.
///
/// Its operations are `zk::mutex`'s: `mutex::acquire()`, `try_acquire()`,
/// `acquire_for()` and `release()` document their handler signatures,
/// executor, cancellation (terminal, partial and total for acquires; none for
/// release), errors and lifetimes, and hold here unchanged (`try_acquire()`
/// gives `dlock::error::taken` while the node exists). `participants()`
/// completes with an empty list (there is no queue).
class simple_lock : public mutex {
 public:
  /// `path`: the lock's node itself (created ephemeral while held).
  simple_lock(client& zk, std::string path, lock_options options = {})
      : mutex(zk, std::move(path), detail::lock_role::exclusive, detail::lock_flavor::simple, std::move(options)) {}

  /// Not available: the node's path is fixed, so a later holder's node has
  /// the same path and version, and a transaction cannot check whose it is.
  /// Use `zk::mutex` for writes conditional on holding the lock.
  op ownership_check() const = delete;
};

static_assert(fenced_lockable<simple_lock>);

}  // namespace dlock::zk
