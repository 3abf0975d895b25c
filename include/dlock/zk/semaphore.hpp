/// @file
/// A counting semaphore of leases on ZooKeeper, shared with Apache Curator.
#pragma once

#include <dlock/config.hpp>
#include <dlock/detail/initiation.hpp>
#include <dlock/lock_loss.hpp>
#include <dlock/lockable.hpp>
#include <dlock/observer.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/detail/lock_options.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>

namespace dlock::zk {

/// How a `semaphore` behaves.
struct semaphore_options {
  /// The data of our lease and `locks` nodes: empty means "<hostname>:<pid>".
  std::string identifier;
  loss_policy policy = loss_policy::standard;  ///< when held leases count as lost
  retry_policy retry;                          ///< retries of a connection loss while acquiring

  /// Told of this semaphore's events (dlock/observer.hpp); none: the client's.
  std::shared_ptr<dlock::observer> observer{};
  /// As zk::lock_options::stall_fraction: with the client's stall monitor,
  /// under `loss_policy::standard`, a stall this long (a fraction of the
  /// session timeout) loses the leases.
  double stall_fraction = 0.5;
};

namespace detail {
class semaphore_core;
using semaphore_core_ptr = std::shared_ptr<semaphore_core>;
enum class semaphore_mode { wait, try_once, wait_for };
using semaphore_handler = asio::any_completion_handler<void(error_code)>;
semaphore_core_ptr make_semaphore_core(client& zk, std::string path, std::size_t max_leases,
                                       semaphore_options options);
void close_semaphore_core(const semaphore_core_ptr& core) noexcept;
void start_semaphore_acquire(const semaphore_core_ptr& core, semaphore_mode mode, std::size_t count,
                             std::chrono::steady_clock::duration limit, semaphore_handler handler);
/// `all`: every lease held, else the `count` acquired last.
void start_semaphore_release(const semaphore_core_ptr& core, bool all, std::size_t count, semaphore_handler handler);
/// A completion token, not a lease count: keeps `acquire(2)` off the token overloads.
template <class T>
concept not_a_count = !std::is_integral_v<std::remove_cvref_t<T>>;
asio::any_io_executor semaphore_executor(const semaphore_core& core) noexcept;
std::size_t semaphore_leases(const semaphore_core& core) noexcept;
const std::string& semaphore_path(const semaphore_core& core) noexcept;
lock_loss& semaphore_loss(semaphore_core& core) noexcept;
}  // namespace detail

/// A counting semaphore: at most `max_leases` leases are held at once, across
/// processes. The layout of Apache Curator's `InterProcessSemaphoreV2`, so JVM
/// services and dlock share one semaphore:
///
/// - `<path>/locks`: an `InterProcessMutex` (`zk::mutex`) that serializes acquirers;
/// - `<path>/leases/_c_<uuid>-lease-<seq>`: one ephemeral-sequential node per lease.
///
/// An acquirer of `n` leases takes the mutex, creates its `n` lease nodes,
/// lists `leases` and, while it has more than `max_leases` children (every
/// child counts, as in Curator), waits for a change of the children while
/// holding the mutex; then releases the mutex. Every process must use the
/// same `max_leases` on one path (nothing on the servers records it).
///
/// An acquire takes its `n` leases all or none: a failed, cancelled or
/// timed-out acquire deletes every lease node it created (only nodes whose
/// session and creation zxid are ours), also one whose create reply was lost
/// (found again by the GUID in its name, in the background if need be).
///
/// Leases add up: an object holding `k` leases may acquire `n` more while
/// `k + n <= max_leases`. `release()` returns them all, `release(k)` the `k`
/// acquired last. One acquire per object at a time. Waiting for more while
/// holding some can deadlock with others doing the same, as can Curator's
/// `acquire(qty > 1)`, which takes its leases one mutex hold at a time:
/// prefer one `acquire(n)` for all you need.
///
/// Executors, threads and lifetime as `zk::mutex`: the state lives on the
/// client's strand; destroying a holding object deletes its lease nodes in
/// the background, destroying it during an acquire aborts the acquire
/// (`operation_aborted`) and leaves no node; destroying the client first
/// makes its operations complete with `dlock::error::closed`.
class semaphore {
 public:
  using executor_type = asio::any_io_executor;  ///< the type of `get_executor()`

  /// `path`: a valid ZooKeeper path other than "/"; `max_leases` > 0. A bad
  /// argument makes every acquire fail with `dlock::error::invalid_argument`.
  semaphore(client& zk, std::string path, std::size_t max_leases, semaphore_options options = {})
      : core_(detail::make_semaphore_core(zk, std::move(path), max_leases, std::move(options))) {}
  ~semaphore() { detail::close_semaphore_core(core_); }
  /// Moves the semaphore (its leases too); the moved-from one may only be destroyed.
  semaphore(semaphore&&) noexcept = default;
  semaphore& operator=(semaphore&&) = delete;
  semaphore(const semaphore&) = delete;
  semaphore& operator=(const semaphore&) = delete;

  /// The client's strand.
  executor_type get_executor() const noexcept { return detail::semaphore_executor(*core_); }

  /// Waits until this object holds `n` more leases.
  ///
  /// @param n how many leases, 1 to `max_leases`.
  /// @param token the completion token.
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// The handler's associated executor (else the client's strand); may be
  /// started from any executor.
  /// @par Cancellation
  /// Terminal, partial and total, from the handler's slot: completes with
  /// `asio::error::operation_aborted` and deletes the lease nodes it created.
  /// @par Errors
  /// `dlock::error::invalid_argument` (bad path, `max_leases` 0, `n` 0 or
  /// above `max_leases`; nothing sent), `dlock::error::already_held` (the
  /// leases held plus `n` exceed `max_leases`), `dlock::error::in_progress`
  /// (an acquire of this object runs), `dlock::error::closed`,
  /// `zk::error::session_expired`, `dlock::error::lost` (a lease node vanished
  /// while waiting), or the last ZooKeeper error once retries run out.
  template <class CompletionToken = default_token>
  auto acquire(std::size_t n, CompletionToken&& token = {}) {
    return initiate(detail::semaphore_mode::wait, n, {}, std::forward<CompletionToken>(token));
  }
  /// `acquire(1)`.
  template <detail::not_a_count CompletionToken = default_token>
  auto acquire(CompletionToken&& token = {}) {
    return acquire(1, std::forward<CompletionToken>(token));
  }

  /// Takes `n` leases only if they are free now.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor, Cancellation
  /// As `acquire()`.
  /// @par Errors
  /// `dlock::error::taken` when fewer than `n` leases are free, or another
  /// acquirer holds `locks` at this instant (no node left behind); those of `acquire()`.
  template <class CompletionToken = default_token>
  auto try_acquire(std::size_t n, CompletionToken&& token = {}) {
    return initiate(detail::semaphore_mode::try_once, n, {}, std::forward<CompletionToken>(token));
  }
  /// `try_acquire(1)`.
  template <detail::not_a_count CompletionToken = default_token>
  auto try_acquire(CompletionToken&& token = {}) {
    return try_acquire(1, std::forward<CompletionToken>(token));
  }

  /// Waits at most `limit` for `n` leases.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor, Cancellation
  /// As `acquire()`.
  /// @par Errors
  /// `dlock::error::timed_out` once `limit` passed (our nodes deleted),
  /// `dlock::error::invalid_argument` for `limit <= 0`; those of `acquire()`.
  template <class CompletionToken = default_token>
  auto acquire_for(std::size_t n, std::chrono::steady_clock::duration limit, CompletionToken&& token = {}) {
    return initiate(detail::semaphore_mode::wait_for, n, limit, std::forward<CompletionToken>(token));
  }
  /// `acquire_for(1, limit)`.
  template <class CompletionToken = default_token>
  auto acquire_for(std::chrono::steady_clock::duration limit, CompletionToken&& token = {}) {
    return acquire_for(1, limit, std::forward<CompletionToken>(token));
  }

  /// Returns every lease held (deletes their nodes).
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// As `acquire()`.
  /// @par Cancellation
  /// None: deletes are retried across reconnects in the background.
  /// @par Errors
  /// None after a hold; a release with nothing held after an earlier release
  /// succeeds; after a loss, the loss reason (the nodes still deleted if the
  /// session lives); `dlock::error::not_held` when nothing was ever held.
  template <detail::not_a_count CompletionToken = default_token>
  auto release(CompletionToken&& token = {}) {
    return initiate_release(true, 0, std::forward<CompletionToken>(token));
  }
  /// Returns the `k` leases acquired last; the loss signal stays armed while any is held.
  ///
  /// @par Handler signature, Executor, Cancellation
  /// As `release()`.
  /// @par Errors
  /// `dlock::error::invalid_argument` for `k` 0 or above `leases()`
  /// (nothing released), `dlock::error::not_held` when none is held, the loss
  /// reason after a loss.
  template <class CompletionToken = default_token>
  auto release(std::size_t k, CompletionToken&& token = {}) {
    return initiate_release(false, k, std::forward<CompletionToken>(token));
  }

  /// True while this object holds at least one lease (and no loss happened).
  bool held() const noexcept { return leases() != 0; }
  /// How many leases this object holds.
  std::size_t leases() const noexcept { return detail::semaphore_leases(*core_); }
  /// Tells the holder its leases are gone: the session expired (or, by
  /// policy, was suspended), or one of our lease nodes was deleted. The whole
  /// set counts as lost.
  lock_loss& loss() noexcept { return detail::semaphore_loss(*core_); }
  /// The semaphore's path.
  const std::string& name() const noexcept { return detail::semaphore_path(*core_); }

 private:
  template <class CompletionToken>
  auto initiate(detail::semaphore_mode mode, std::size_t n, std::chrono::steady_clock::duration limit,
                CompletionToken&& token) {
    return dlock::detail::async_initiate_on<CompletionToken, void(error_code)>(*this,
        [](auto handler, detail::semaphore_core_ptr core, detail::semaphore_mode m, std::size_t count,
           std::chrono::steady_clock::duration l) {
          detail::start_semaphore_acquire(core, m, count, l, detail::semaphore_handler(std::move(handler)));
        },
        token, core_, mode, n, limit);
  }
  template <class CompletionToken>
  auto initiate_release(bool all, std::size_t k, CompletionToken&& token) {
    return dlock::detail::async_initiate_on<CompletionToken, void(error_code)>(*this,
        [](auto handler, detail::semaphore_core_ptr core, bool every, std::size_t count) {
          detail::start_semaphore_release(core, every, count, detail::semaphore_handler(std::move(handler)));
        },
        token, core_, all, k);
  }

  detail::semaphore_core_ptr core_;
};

static_assert(lockable<semaphore>);

}  // namespace dlock::zk
