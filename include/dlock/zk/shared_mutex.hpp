// A read/write lock on a ZooKeeper path: many readers, or one writer.
#pragma once

#include <dlock/zk/mutex.hpp>

namespace dlock::zk {

/// The ZooKeeper recipe's shared lock, compatible with Apache Curator's
/// `InterProcessReadWriteLock` (nodes `_c_<uuid>-__READ__<seq>` and
/// `_c_<uuid>-__WRIT__<seq>` under the lock path).
///
/// A reader holds when no write node has a lower sequence, and otherwise
/// watches the nearest lower write node; a writer holds when first and
/// otherwise watches its immediate predecessor. Queue order is creation
/// order, so a waiting writer is never starved by readers that come later.
///
/// `reader()` and `writer()` are independent `zk::mutex` objects: their
/// operations (`mutex::acquire()`, `try_acquire()`, `acquire_for()`,
/// `release()`, `participants()`) have the handler signatures, executor,
/// cancellation, errors and lifetimes documented there; `participants()`
/// lists readers and writers. Holding both on one `shared_mutex` is two
/// contenders: a reader queued behind this object's own writer waits for it
/// (no downgrade). Destroying the `shared_mutex` destroys both sides
/// (releasing in the background what they hold).
class shared_mutex {
 public:
  /// `path`: the lock's node, shared by readers and writers (Curator's `__READ__` / `__WRIT__` children).
  shared_mutex(client& zk, const std::string& path, lock_options options = {})
      : reader_(zk, path, detail::lock_role::reader, detail::lock_flavor::sequential, options),
        writer_(zk, path, detail::lock_role::writer, detail::lock_flavor::sequential, std::move(options)) {}

  /// The read side: held together with other readers, never with a writer.
  /// Its operations are `zk::mutex`'s (see `mutex::acquire()`).
  mutex& reader() noexcept { return reader_; }
  /// The write side: held alone. Its operations are `zk::mutex`'s (see `mutex::acquire()`).
  mutex& writer() noexcept { return writer_; }

 private:
  mutex reader_;
  mutex writer_;
};

}  // namespace dlock::zk
