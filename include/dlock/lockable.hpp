// What every dlock lock has in common: the `dlock::lockable` concept.
#pragma once

#include <dlock/config.hpp>
#include <dlock/error.hpp>
#include <dlock/lock_loss.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <concepts>
#include <cstdint>
#include <string_view>

namespace dlock {

namespace detail {

/// A completion token that starts nothing: the operation's initiation is
/// dropped and the call returns a `probed<Signature>`, so a concept can check
/// an operation's handler signature without running it.
struct signature_probe {};
template <class Signature>
struct probed {};

}  // namespace detail

/// The parts `dlock::with_lock` needs: acquire, release, the loss signal and
/// the executor the lock runs on. A leader election's campaign and resign can
/// be wrapped to satisfy it.
template <class Lock>
concept basic_lockable = requires(Lock& lock) {
  { lock.acquire(detail::signature_probe{}) } -> std::same_as<detail::probed<void(error_code)>>;
  { lock.release(detail::signature_probe{}) } -> std::same_as<detail::probed<void(error_code)>>;
  { lock.loss() } -> std::same_as<lock_loss&>;
  { lock.get_executor() } -> std::convertible_to<asio::any_io_executor>;
};

/// A dlock lock: `zk::mutex`, `zk::simple_lock`, `zk::shared_mutex`'s
/// `reader()` and `writer()`, `redis::lock`, `redis::redlock`. Every one
/// behaves the same in each situation (the README's contract table,
/// checked by test/integration/lock_conformance.cpp):
///
/// - `acquire()` waits (as long as the lock's own options allow),
///   `try_acquire()` takes the lock only if it is free now (else
///   `dlock::error::taken`), `acquire_for(d)` waits at most `d` (then
///   `dlock::error::timed_out`). All three complete with `void(error_code)`,
///   honour terminal and partial cancellation and leave nothing behind when
///   they fail.
/// - `release()` completes with `void(error_code)`, is never cancelled, is a
///   no-op success the second time and reports the loss reason after a loss.
/// - `held()` is true between a successful acquire and release or loss;
///   `loss()` tells the holder; `name()` is the path or key.
template <class Lock>
concept lockable = basic_lockable<Lock> &&
    requires(Lock& lock, const Lock& const_lock, std::chrono::steady_clock::duration limit) {
      { lock.try_acquire(detail::signature_probe{}) } -> std::same_as<detail::probed<void(error_code)>>;
      { lock.acquire_for(limit, detail::signature_probe{}) } -> std::same_as<detail::probed<void(error_code)>>;
      { const_lock.held() } noexcept -> std::same_as<bool>;
      { const_lock.name() } -> std::convertible_to<std::string_view>;
    };

/// A lock that gives each hold a fencing token that only grows from one hold
/// to the next (ZooKeeper: the node's creation zxid; Redis: a counter kept
/// beside the key); 0 when nothing is held.
template <class Lock>
concept fenced_lockable = lockable<Lock> && requires(const Lock& lock) {
  { lock.fencing_token() } noexcept -> std::same_as<std::int64_t>;
};

}  // namespace dlock

/// @cond INTERNAL
// The probe's async_result: nothing is initiated.
template <class R, class... Args>
struct boost::asio::async_result<dlock::detail::signature_probe, R(Args...)> {
  using return_type = dlock::detail::probed<R(Args...)>;
  template <class Initiation, class... InitArgs>
  static return_type initiate(Initiation&&, dlock::detail::signature_probe, InitArgs&&...) {
    return {};
/// @endcond
  }
};
