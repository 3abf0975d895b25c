/// @file
/// The loss of a held lock, told to its holder.
///
/// A lock can be lost while held: its ZooKeeper session expires (or, by
/// policy, is suspended), or a Redis lock's validity runs out before an
/// extension succeeds. Every dlock lock owns one `lock_loss`; holders either
/// `co_await` it or bind a cancellation signal to it so the critical section
/// is cancelled the moment the lock is gone.
#pragma once

#include <dlock/config.hpp>
#include <dlock/detail/initiation.hpp>
#include <dlock/error.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>

#include <memory>

namespace dlock {

/// Tells a lock's holder that the hold is lost.
///
/// Thread-safe: the holder may wait, bind, unbind and ask from any thread
/// while the lock arms, fires and disarms it on its own executor (the
/// ZooKeeper client's strand, or the Redis connection's executor), so an
/// io_context run by several threads is fine. Completions are posted, never
/// run inside a call, to the handler's associated executor (falling back to
/// the lock's).
class lock_loss {
 public:
  /// A loss for a lock running on `executor` (not armed).
  explicit lock_loss(asio::any_io_executor executor);
  ~lock_loss();  ///< waiters complete with operation_aborted
  lock_loss(const lock_loss&) = delete;             ///< not copyable
  lock_loss& operator=(const lock_loss&) = delete;  ///< not copyable

  /// The lock's executor (the one given to the constructor).
  asio::any_io_executor get_executor() const noexcept;

  // --- for holders ---

  /// True once the current hold is lost (until the next acquisition).
  bool lost() const noexcept;
  /// Why the hold was lost (`dlock::error::lost`, or a backend code such as
  /// session expired); empty while held or never held.
  error_code reason() const noexcept;
  /// True between acquisition and release or loss.
  bool armed() const noexcept;

  /// Completes with the loss reason when the current hold is lost, at once
  /// if it already is (until the next acquisition).
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// The handler's associated executor (else the lock's); posted, never
  /// inside this call. May be started from any thread.
  /// @par Cancellation
  /// Terminal, partial and total: completes with
  /// `asio::error::operation_aborted` (waiting is pure bookkeeping).
  /// @par Errors
  /// The loss reason (`dlock::error::lost`, `zk::error::session_expired`,
  /// ...) is the outcome waited for; `asio::error::operation_aborted` when the
  /// lock is released first, the wait is cancelled, or the lock is
  /// destroyed; `dlock::error::not_held` when nothing is held.
  /// @par Lifetime
  /// The lock (which owns this object) must be alive when the wait starts
  /// (with the default token, when it is awaited); destroying it later
  /// completes the wait with `operation_aborted`.
  template <class CompletionToken = default_token>
  auto wait(CompletionToken&& token = {}) {
    return dlock::detail::async_initiate_on<CompletionToken, void(error_code)>(*this,
        [this](auto handler) {
          start_wait(asio::any_completion_handler<void(error_code)>(std::move(handler)));
        },
        token);
  }

  /// Emits `type` on `signal` when the current hold is lost: bind the slot of
  /// a critical section's operations to `signal` and they are cancelled on
  /// loss. The binding ends at release, at loss, or at `unbind`; `signal`
  /// must outlive it. If the hold is already lost, emits at once.
  ///
  /// A cancellation signal is not thread-safe: it is emitted on `executor`,
  /// which must be where the operations using its slot run (and where
  /// `unbind` and the signal's destruction happen). Without `executor`, the
  /// lock's own: right for one thread; with several, pass your strand.
  void bind(asio::cancellation_signal& signal, asio::any_io_executor executor,
            asio::cancellation_type type = asio::cancellation_type::terminal);
  /// The same, emitting on the lock's executor.
  void bind(asio::cancellation_signal& signal,
            asio::cancellation_type type = asio::cancellation_type::terminal);
  /// After it returns, nothing is emitted on `signal` (called on the
  /// binding's executor).
  void unbind(asio::cancellation_signal& signal) noexcept;

  // --- for lock implementations (on the lock's executor) ---

  /// A new hold begins: forgets the previous loss.
  void arm();
  /// The hold is lost: completes waiters with `reason`, emits bound signals.
  /// Has no effect unless armed, so a loss is told once per hold.
  void fire(error_code reason);
  /// The hold ended normally (release): waiters complete with
  /// operation_aborted and bindings are dropped.
  void disarm();

 private:
  struct state;

  void start_wait(asio::any_completion_handler<void(error_code)> handler);

  // Shared with the cancellation handlers and emissions in flight, which
  // may outlive this object (they then find nothing to do).
  std::shared_ptr<state> state_;
};

}  // namespace dlock
