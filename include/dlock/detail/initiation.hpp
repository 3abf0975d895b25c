// asio::async_initiate with an initiation (what it calls with the handler)
// that names the executor of the object starting the operation.
//
// asio::cancel_after and cancel_at without a timer of their own (Asio 1.31,
// Boost 1.86, on) make their timer on the initiation's executor: a bare
// lambda has none, and `m.acquire(asio::cancel_after(5s))` would not
// compile. Other completion tokens ignore it.
#pragma once

#include <dlock/detail/require_cxx20.hpp>

#include <boost/asio/async_result.hpp>

#include <type_traits>
#include <utility>

namespace dlock::detail {

template <class Executor, class Start>
class initiation_on {
 public:
  using executor_type = Executor;

  initiation_on(Executor executor, Start start) : executor_(std::move(executor)), start_(std::move(start)) {}

  executor_type get_executor() const noexcept { return executor_; }

  template <class Handler, class... Args>
  void operator()(Handler&& handler, Args&&... args) const {
    start_(std::forward<Handler>(handler), std::forward<Args>(args)...);
  }

 private:
  Executor executor_;
  Start start_;
};

/// asio::async_initiate<Token, Signature>(start, token, args...), `start`
/// running for an object whose executor is `executor`.
template <class Token, class Signature, class Executor, class Start, class... Args>
auto async_initiate_on(Executor executor, Start start, std::type_identity_t<Token>& token, Args&&... args) {
  return boost::asio::async_initiate<Token, Signature>(initiation_on<Executor, Start>(std::move(executor), std::move(start)),
                                                       token, std::forward<Args>(args)...);
}

}  // namespace dlock::detail
