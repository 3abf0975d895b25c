// A fair (FIFO), herd-free exclusive lock on a ZooKeeper path.
#pragma once

#include <dlock/config.hpp>
#include <dlock/detail/initiation.hpp>
#include <dlock/lock_loss.hpp>
#include <dlock/lockable.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/multi.hpp>
#include <dlock/zk/detail/lock_core_api.hpp>
#include <dlock/zk/detail/lock_options.hpp>

#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dlock::zk {

class shared_mutex;

/// The ZooKeeper recipe's exclusive lock, compatible with Apache Curator's
/// `InterProcessMutex`.
///
/// Each acquire creates `<path>/_c_<uuid>-lock-<seq>` (ephemeral, sequential;
/// missing parents are created as container nodes), lists the children and
/// holds the lock when its node has the lowest sequence; otherwise it watches
/// only the next-lower node and lists again when that one goes. Contenders
/// are ordered by the server's sequence suffix, never by prefix, so Curator's
/// and kazoo's nodes on the same path queue correctly; children without a
/// sequence suffix are ignored (with a log line). One limit of mixing: when
/// the parent's signed 32-bit child counter wraps (after about 10^9
/// acquisitions on one path; a reaped container resets it), dlock orders by
/// serial arithmetic and Curator by string, so a mixed fleet would disagree
/// about who is first. A dlock-only fleet stays right across the wrap.
///
/// Waiting is fair (node creation order) and wakes one waiter per release.
/// A lost `create` reply is recovered by the GUID in the node name, adopting
/// a node only if its `ephemeralOwner` is the current session. A cancelled,
/// timed-out or failed acquire deletes its own node, even when its create
/// reply arrives after the cancellation; that cleanup is never cancelled.
///
/// Not reentrant: acquiring while this object holds (or is acquiring) the
/// lock completes with `dlock::error::already_held`.
///
/// Operations complete on the handler's associated executor; the object's
/// state lives on the client's strand. Use one object from one coroutine (or
/// thread) at a time; the io_context may run on several threads: operations
/// may be started from any executor, and `held()`, `fencing_token()` and
/// `loss()` may be used from any thread. The object keeps a borrowed handle on the client's session:
/// destroying the client first makes its operations complete with `dlock::error::closed`.
/// Destroying a holding object releases in the background.
class mutex {
 public:
  /// The executor type.
  using executor_type = asio::any_io_executor;

  /// `path`: the lock's node (a valid ZooKeeper path other than "/").
  mutex(client& zk, std::string path, lock_options options = {})
      : mutex(zk, std::move(path), detail::lock_role::exclusive, detail::lock_flavor::sequential,
              std::move(options)) {}
  ~mutex() { detail::close_lock_core(core_); }
  /// Moves the lock (its hold too); the moved-from lock may only be destroyed.
  mutex(mutex&&) noexcept = default;
  mutex& operator=(mutex&&) = delete;
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;

  /// The session's strand: every operation completes there unless its handler says otherwise.
  executor_type get_executor() const noexcept { return detail::core_executor(*core_); }

  /// Waits until this object holds the lock (our node is the first in line).
  ///
  /// @param token the completion token.
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// The handler's associated executor (else the client's strand); may be
  /// started from any executor.
  /// @par Cancellation
  /// Terminal, partial and total, from the handler's slot: completes with
  /// `asio::error::operation_aborted` and deletes our node, even one whose
  /// create reply arrives after the cancel.
  /// @par Errors
  /// `dlock::error::already_held` (this object holds),
  /// `dlock::error::in_progress` (an acquire of this object is running),
  /// `dlock::error::invalid_argument` (bad path, nothing sent),
  /// `dlock::error::closed` (the client is closed), `zk::error::session_expired`
  /// (while waiting), `dlock::error::expired` (the grant was read when the
  /// servers may already have expired the session, e.g. the event loop was
  /// blocked past the session timeout: not held, our node is removed), or
  /// the last ZooKeeper error once retries run out.
  /// @par Lifetime
  /// The object may be destroyed while the operation runs: it then completes
  /// with `operation_aborted` and leaves no node. The client may be destroyed
  /// first: the operation then completes with `dlock::error::closed`.
  template <class CompletionToken = default_token>
  auto acquire(CompletionToken&& token = {}) {
    return initiate(detail::acquire_mode::wait, {}, std::forward<CompletionToken>(token));
  }

  /// Takes the lock only if it is free now.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor, Cancellation, Lifetime
  /// As `acquire()`.
  /// @par Errors
  /// `dlock::error::taken` when someone holds it (no node left behind), and
  /// those of `acquire()`.
  template <class CompletionToken = default_token>
  auto try_acquire(CompletionToken&& token = {}) {
    return initiate(detail::acquire_mode::try_once, {}, std::forward<CompletionToken>(token));
  }

  /// Waits at most `limit`.
  ///
  /// @param limit how long to wait; must be positive.
  /// @param token the completion token.
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor, Cancellation, Lifetime
  /// As `acquire()`.
  /// @par Errors
  /// `dlock::error::timed_out` once `limit` has passed (our node deleted),
  /// `dlock::error::invalid_argument` for `limit <= 0` (nothing sent), and
  /// those of `acquire()`.
  template <class CompletionToken = default_token>
  auto acquire_for(std::chrono::steady_clock::duration limit, CompletionToken&& token = {}) {
    return initiate(detail::acquire_mode::wait_for, limit, std::forward<CompletionToken>(token));
  }

  /// Deletes our node.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// As `acquire()`.
  /// @par Cancellation
  /// None: a release runs to completion (retried across reconnects in the
  /// background while the session lives).
  /// @par Errors
  /// None after a hold; a second release is a no-op that succeeds; after a
  /// loss, the loss reason (the node is still deleted if the session lives);
  /// `dlock::error::not_held` when nothing was held.
  template <class CompletionToken = default_token>
  auto release(CompletionToken&& token = {}) {
    return dlock::detail::async_initiate_on<CompletionToken, void(error_code)>(*this,
        [](auto handler, detail::lock_core_ptr core) {
          detail::start_release(core, asio::any_completion_handler<void(error_code)>(std::move(handler)));
        },
        token, core_);
  }

  /// The contenders' identifiers (node data), holder first, in queue order.
  ///
  /// @par Handler signature
  /// `void(error_code, std::vector<std::string>)`.
  /// @par Executor
  /// As `acquire()`.
  /// @par Cancellation
  /// None: the listing and its reads run to the end (cancellation is ignored).
  /// @par Errors
  /// `dlock::error::invalid_argument` (bad path, nothing sent), or the error of
  /// the listing or a read (`dlock::error::closed`, `zk::error::connection_loss`,
  /// ...); a missing lock node or a contender that leaves meanwhile is no error.
  /// @par Lifetime
  /// The object may be destroyed while it runs; the client too (`closed`).
  template <class CompletionToken = default_token>
  auto participants(CompletionToken&& token = {}) {
    return dlock::detail::async_initiate_on<CompletionToken, void(error_code, std::vector<std::string>)>(*this,
        [](auto handler, detail::lock_core_ptr core) {
          detail::start_participants(
              core, asio::any_completion_handler<void(error_code, std::vector<std::string>)>(std::move(handler)));
        },
        token, core_);
  }

  /// True between a successful acquire and release or loss.
  bool held() const noexcept { return detail::core_held(*core_); }

  /// The fencing token of the current hold: our node's creation zxid.
  /// ZooKeeper zxids only grow, so successive holders of this lock get
  /// strictly increasing tokens, even across deletion of the lock path. A
  /// holder can be paused (GC, swap, SIGSTOP) past its session and resume
  /// writing after someone else took the lock; no lock can stop that, but the
  /// storage it writes to can reject tokens lower than one it has seen.
  /// 0 when nothing is held.
  std::int64_t fencing_token() const noexcept { return detail::core_fencing_token(*core_); }

  /// An operation for `client::multi` that fails the whole transaction
  /// unless this lock is still held (etcd's `IsOwner()`): a check of our
  /// node, version 0 of its unique sequential path. Put it in the
  /// transaction with the writes it guards: once the session that made the
  /// node ended, the node is gone and the transaction fails with
  /// `zk::error::no_node`, writing nothing, even if this holder has not heard
  /// of the loss yet. When not held (never, waiting, released, or a loss
  /// known here), the check names a node that does not exist: the same
  /// `no_node`. Read on `get_executor()`.
  op ownership_check() const {
    return op::check(held() ? node_path() : path() + "/dlock-not-held", 0);
  }

  /// Tells the holder its lock is gone (per `lock_options::policy`): `co_await
  /// loss().wait()`, or `loss().bind(signal)` to cancel a critical section.
  lock_loss& loss() noexcept { return detail::core_loss(*core_); }

  /// The lock's path, and our node's full path while held or acquiring (else empty).
  /// `node_path()` does not change from acquire's completion to release; while
  /// an acquire runs, read it on `get_executor()`.
  const std::string& path() const noexcept { return detail::core_path(*core_); }
  /// The lock's path (`dlock::lockable`'s name).
  const std::string& name() const noexcept { return path(); }
  /// Our lock node's full path while we hold or wait (empty otherwise).
  std::string node_path() const { return detail::core_node_path(*core_); }

 private:
  friend class shared_mutex;
  friend class simple_lock;
  friend class leader_election;

  mutex(client& zk, std::string path, detail::lock_role role, detail::lock_flavor flavor, lock_options options)
      : core_(detail::make_lock_core(zk, std::move(path), role, flavor, std::move(options))) {}

  template <class CompletionToken>
  auto initiate(detail::acquire_mode mode, std::chrono::steady_clock::duration limit, CompletionToken&& token) {
    return dlock::detail::async_initiate_on<CompletionToken, void(error_code)>(*this,
        [](auto handler, detail::lock_core_ptr core, detail::acquire_mode m,
           std::chrono::steady_clock::duration l) {
          detail::start_acquire(core, m, l, asio::any_completion_handler<void(error_code)>(std::move(handler)));
        },
        token, core_, mode, limit);
  }
  // A leader election's campaign: an acquire whose node carries `identifier`.
  template <class CompletionToken>
  auto acquire_as(std::string identifier, CompletionToken&& token) {
    return dlock::detail::async_initiate_on<CompletionToken, void(error_code)>(*this,
        [](auto handler, detail::lock_core_ptr core, std::string id) {
          detail::start_acquire(core, detail::acquire_mode::wait, {},
                                asio::any_completion_handler<void(error_code)>(std::move(handler)), std::move(id));
        },
        token, core_, std::move(identifier));
  }

  detail::lock_core_ptr core_;
};

static_assert(fenced_lockable<mutex>);

}  // namespace dlock::zk
