// asio::co_spawn for a caller's completion handler, with the caller's
// cancellation slot forwarded safely.
//
// Asio 1.81's co_spawn forwards a slot's signal by dispatching, to the
// coroutine's executor, a raw pointer to a signal kept in the slot's memory.
// A caller that emits from outside that executor (a strand) and destroys its
// signal as the operation completes (a timer racing the operation) leaves
// the dispatch to emit on freed memory. Here the slot's forwarder shares the
// coroutine's signal with the completion, and emits only while the coroutine
// has not finished.
#pragma once

#include <dlock/detail/require_cxx20.hpp>

#include <boost/asio/associator.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>

#include <atomic>
#include <memory>
#include <utility>

namespace dlock::detail {

/// The coroutine's own cancellation signal, shared by the caller's slot and
/// the completion.
struct spawned_cancellation {
  boost::asio::cancellation_signal signal;
  std::atomic<bool> finished{false};
};

/// Installed in the caller's slot: forwards a signal to the coroutine's
/// executor, where the coroutine's signal is emitted.
/// A constructor, not an aggregate: the slot's emplace builds it with
/// parentheses, which clang accepts for aggregates only from 16.
template <class Executor>
struct forward_to_spawned {
  forward_to_spawned(Executor ex, std::shared_ptr<spawned_cancellation> shared)
      : executor(std::move(ex)), cancellation(std::move(shared)) {}

  Executor executor;
  std::shared_ptr<spawned_cancellation> cancellation;

  void operator()(boost::asio::cancellation_type type) {
    boost::asio::dispatch(executor, [shared = cancellation, type] {
      if (!shared->finished) shared->signal.emit(type);
    });
  }
};

/// The caller's handler, after marking the coroutine finished. Keeps the
/// handler's associated executor and allocator (see the associator below).
template <class Handler>
struct finish_then {
  Handler handler;
  std::shared_ptr<spawned_cancellation> cancellation;

  template <class... Args>
  void operator()(Args&&... args) {
    cancellation->finished = true;
    std::move(handler)(std::forward<Args>(args)...);
  }
};

/// co_spawn(executor, body, handler), the signals of `caller_slot` reaching
/// the coroutine (as co_spawn's own forwarding would, without its dangling
/// pointer).
template <class Executor, class T, class AwaitableExecutor, class Handler>
void co_spawn_for(const Executor& executor, boost::asio::awaitable<T, AwaitableExecutor> body,
                  boost::asio::cancellation_slot caller_slot, Handler handler) {
  if (!caller_slot.is_connected()) {
    boost::asio::co_spawn(executor, std::move(body), std::move(handler));
    return;
  }
  auto cancellation = std::make_shared<spawned_cancellation>();
  caller_slot.template emplace<forward_to_spawned<Executor>>(executor, cancellation);
  auto coroutine_slot = cancellation->signal.slot();
  boost::asio::co_spawn(
      executor, std::move(body),
      boost::asio::bind_cancellation_slot(coroutine_slot,
                                          finish_then<Handler>{std::move(handler), std::move(cancellation)}));
}

/// As above, with the handler's own associated slot.
template <class Executor, class T, class AwaitableExecutor, class Handler>
void co_spawn_for(const Executor& executor, boost::asio::awaitable<T, AwaitableExecutor> body, Handler handler) {
  auto slot = boost::asio::get_associated_cancellation_slot(handler);
  co_spawn_for(executor, std::move(body), slot, std::move(handler));
}

}  // namespace dlock::detail

template <template <typename, typename> class Associator, class Handler, class DefaultCandidate>
struct boost::asio::associator<Associator, dlock::detail::finish_then<Handler>, DefaultCandidate>
    : Associator<Handler, DefaultCandidate> {
  static typename Associator<Handler, DefaultCandidate>::type get(const dlock::detail::finish_then<Handler>& h) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.handler);
  }
  static auto get(const dlock::detail::finish_then<Handler>& h, const DefaultCandidate& c) noexcept
      -> decltype(Associator<Handler, DefaultCandidate>::get(h.handler, c)) {
    return Associator<Handler, DefaultCandidate>::get(h.handler, c);
  }
};
