/// @file
/// A one-shot ZooKeeper watch whose event you co_await.
#pragma once

#include <dlock/config.hpp>
#include <dlock/detail/initiation.hpp>
#include <dlock/error.hpp>
#include <dlock/zk/types.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>

#include <memory>
#include <type_traits>

namespace dlock::zk {

class client;

namespace detail {
class watch_state;
struct watch_access;
using watch_handler = asio::any_completion_handler<void(error_code, watch_event)>;
void start_watch_wait(const std::shared_ptr<watch_state>& state, watch_handler handler);
void cancel_watch(const std::shared_ptr<watch_state>& state);

struct no_executor {};
/// Whether `Handler` has an associated executor of its own.
template <class Handler>
inline constexpr bool has_executor =
    !std::is_same_v<asio::associated_executor_t<Handler, no_executor>, no_executor>;

/// A wait on an unarmed watch: `invalid_argument`, posted to the handler's
/// executor, else to `last_client` (the strand of the client that armed the
/// watch last). A handler with neither runs in place: the only executor
/// left would be Asio's system executor, whose thread is not the program's.
template <class Handler>
void reject_unarmed(Handler handler, const asio::any_io_executor& last_client) {
  error_code ec = make_error_code(dlock::error::invalid_argument);
  if (last_client) return asio::post(last_client, asio::append(std::move(handler), ec, watch_event{}));
  if constexpr (has_executor<Handler>) {
    auto ex = asio::get_associated_executor(handler);
    asio::post(ex, asio::append(std::move(handler), ec, watch_event{}));
  } else {
    std::move(handler)(ec, watch_event{});
  }
}
}  // namespace detail

/// A one-shot ZooKeeper watch whose event you co_await.
///
/// Owned by the caller and armed by `client::get/exists/get_children(path, w)`.
/// It fires once. If the arming call fails (e.g. `get` on a missing node) no
/// watch is left behind and `wait` completes with that call's error.
/// `cancel()` or destruction removes the watch from the session, and no
/// handler runs for it afterwards. Re-arming replaces the previous watch.
///
/// Thread safety: like the client, use it from one thread (or strand) at a time.
class watch {
 public:
  watch() = default;  ///< not armed
  ~watch();  ///< cancels
  watch(watch&&) noexcept = default;         ///< takes over `other`'s watch
  watch& operator=(watch&& other) noexcept;  ///< cancels this one, takes over `other`'s
  watch(const watch&) = delete;              ///< not copyable
  watch& operator=(const watch&) = delete;   ///< not copyable

  /// The executor type: Asio's polymorphic I/O executor.
  using executor_type = asio::any_io_executor;
  /// The strand of the client that armed it last (none if never armed).
  executor_type get_executor() const noexcept { return executor_; }

  /// True once armed (even if already fired), until cancelled or re-armed.
  bool armed() const noexcept { return static_cast<bool>(state_); }

  /// Completes with the event once it fires (at once if it already has).
  ///
  /// @par Handler signature
  /// `void(error_code, watch_event)`.
  /// @par Executor
  /// The handler's associated executor (else the strand of the client that
  /// armed it last); never inside this call, except for a handler without
  /// an executor on a watch no client ever armed (called in place: dlock
  /// has no thread of its own to post it to).
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`;
  /// the watch stays armed and can be awaited again.
  /// @par Errors
  /// `asio::error::operation_aborted` also when the watch is cancelled,
  /// re-armed or destroyed, or when another `wait` starts (one waiter at a
  /// time: the newer wins); `zk::error::session_expired` (the session, and so
  /// the watch, is gone), `dlock::error::closed` (client closed), the arming
  /// call's error if it failed, `dlock::error::invalid_argument` if never armed.
  /// @par Lifetime
  /// The watch object may be destroyed while waiting (the wait then gives
  /// `operation_aborted`); so may the client (`dlock::error::closed`).
  template <class CompletionToken = default_token>
  auto wait(CompletionToken&& token = {}) {
    return dlock::detail::async_initiate_on<CompletionToken, void(error_code, watch_event)>(*this,
        [](auto handler, std::shared_ptr<detail::watch_state> state, asio::any_io_executor last_client) {
          if (!state) return detail::reject_unarmed(std::move(handler), last_client);
          detail::start_watch_wait(state, detail::watch_handler(std::move(handler)));
        },
        token, state_, executor_);
  }

  /// Removes the watch from the session (if registered) and completes a
  /// pending `wait` with `operation_aborted`. The watch is then unarmed.
  void cancel();

 private:
  friend struct detail::watch_access;
  std::shared_ptr<detail::watch_state> state_;
  asio::any_io_executor executor_;  // the strand of the client that armed it last (kept when unarmed)
};

}  // namespace dlock::zk
