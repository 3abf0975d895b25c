// Options shared by the ZooKeeper locks (mutex, shared_mutex, simple_lock).
#pragma once

#include <dlock/observer.hpp>
#include <dlock/zk/detail/retry.hpp>

#include <cstddef>
#include <memory>
#include <string>

namespace dlock::zk {

/// When a held lock counts as lost (Apache Curator's names and defaults).
enum class loss_policy {
  /// Lost as soon as the connection is suspended: the session may already be
  /// gone on the servers, so the holder can no longer vouch for its node.
  standard,
  /// Lost only when the session is lost: expired, or still disconnected 0.9 T
  /// after a server last heard from the client (T: the negotiated session
  /// timeout), before the servers can expire it. Holds across short drops.
  session,
};

/// The longest identifier a lock, semaphore or election candidate accepts
/// (64 KiB); a longer one fails the acquire with
/// `dlock::error::invalid_argument`, nothing sent. With a path of at most
/// `max_path_size`, every request a lock sends stays far below the servers'
/// packet limit (`jute.maxbuffer`, 1 MiB - 1 by default), over which a server
/// drops the whole session's connection, suspending every lock on it.
inline constexpr std::size_t max_identifier_size = 64 * 1024;

/// How a ZooKeeper lock behaves.
struct lock_options {
  /// Stored as the lock node's data and shown by `participants()`:
  /// empty means "<hostname>:<pid>".
  std::string identifier;
  loss_policy policy = loss_policy::standard;  ///< when a held lock counts as lost
  retry_policy retry;                          ///< retries of a connection loss while acquiring

  /// A waiting acquire (`acquire`, `acquire_for`; not `try_acquire`) whose
  /// session expires before it holds the lock starts again on the session
  /// the client reopens (`options::reopen_on_expiry`), within its wait limit
  /// and its cancellation, instead of failing with `zk::error::session_expired`.
  /// It queues again at the back: the expiry took its node. Mutex, shared
  /// mutex and leader election; `simple_lock` ignores it. Off by default, so
  /// code that reacts to an expiry hears of it.
  bool restart_after_expiry = false;
  /// Told of this lock's events (dlock/observer.hpp); none: the client's.
  std::shared_ptr<dlock::observer> observer{};
  /// With the client's stall monitor, under `loss_policy::standard`: a stall
  /// this long, as a fraction of the negotiated session timeout, loses the
  /// hold (the servers may have expired the session meanwhile).
  double stall_fraction = 0.5;
};

}  // namespace dlock::zk
