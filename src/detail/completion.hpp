// Completing a handler on its associated executor (`fallback` when it has
// none). Which one to use is a matter of where the caller stands.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <utility>

namespace dlock::detail {

/// From an initiating function (or while walking shared state): never in place.
template <class Handler, class... Args>
void post_completion(const boost::asio::any_io_executor& fallback, Handler&& h, Args&&... args) {
  boost::asio::post(fallback, boost::asio::append(std::forward<Handler>(h), std::forward<Args>(args)...));
}

/// From a reply, a timer or a cancellation: in place when that executor is
/// the one running this thread.
template <class Handler, class... Args>
void dispatch_completion(const boost::asio::any_io_executor& fallback, Handler&& h, Args&&... args) {
  boost::asio::dispatch(fallback, boost::asio::append(std::forward<Handler>(h), std::forward<Args>(args)...));
}

/// From a handler running on `fallback`'s executor: in place when `in_place`
/// (decided at initiation: the handler runs on that executor, see runs_on),
/// else as dispatch_completion. Same outcome as dispatch, without its hops.
template <class Handler, class... Args>
void complete_from_handler(bool in_place, const boost::asio::any_io_executor& fallback, Handler&& h, Args&&... args) {
  if (in_place) return std::forward<Handler>(h)(std::forward<Args>(args)...);
  dispatch_completion(fallback, std::forward<Handler>(h), std::forward<Args>(args)...);
}

/// This thread is running `ex`'s io_context now (false for any other kind
/// of executor, a strand included: then only asio::dispatch knows).
inline bool running_on(const boost::asio::any_io_executor& ex) noexcept {
  auto* io = ex.target<boost::asio::io_context::executor_type>();
  return io && io->running_in_this_thread();
}

/// asio::dispatch(ex, f), which runs `f` in place when this thread runs
/// `ex`'s io_context; this says so first, and then calls `f` itself, without
/// wrapping it for the type-erased executor (an initiation's common case:
/// a coroutine on the lock's own executor).
template <class Function>
void dispatch_here(const boost::asio::any_io_executor& ex, Function&& f) {
  if (running_on(ex)) return std::forward<Function>(f)();
  boost::asio::dispatch(ex, std::forward<Function>(f));
}

}  // namespace dlock::detail
