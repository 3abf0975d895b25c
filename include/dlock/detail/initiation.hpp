// asio::async_initiate with an initiation (what it calls with the handler)
// that names the executor of the object starting the operation.
//
// asio::cancel_after and cancel_at without a timer of their own (Asio 1.31,
// Boost 1.86, on) make their timer on the initiation's executor: a bare
// lambda has none, and `m.acquire(asio::cancel_after(5s))` would not
// compile. Other completion tokens ignore it.
#pragma once

#include <dlock/detail/require_cxx20.hpp>

#include <dlock/detail/in_place.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <type_traits>
#include <utility>

namespace dlock::detail {

template <class Object, class Start>
class initiation_on {
 public:
  using executor_type = decltype(std::declval<const Object&>().get_executor());

  initiation_on(const Object& object, Start start) : object_(&object), start_(std::move(start)) {}

  // Read only when asked (cancel_after): most tokens never ask, and copying
  // an executor at every call is not free (a strand's is reference counted).
  // As with Asio's own I/O objects, the object outlives its operations.
  executor_type get_executor() const noexcept { return object_->get_executor(); }

  template <class Handler, class... Args>
  void operator()(Handler&& handler, Args&&... args) const {
    start_(std::forward<Handler>(handler), std::forward<Args>(args)...);
  }

 private:
  const Object* object_;
  Start start_;
};

/// asio::async_initiate<Token, Signature>(start, token, args...), `start`
/// running for `object` (which has get_executor()).
template <class Token, class Signature, class Object, class Start, class... Args>
auto async_initiate_on(const Object& object, Start start, std::type_identity_t<Token>& token, Args&&... args) {
  return boost::asio::async_initiate<Token, Signature>(initiation_on<Object, Start>(object, std::move(start)), token,
                                                       std::forward<Args>(args)...);
}

/// The same for an object whose operations start from a type-erased
/// handler: `start(handler, in_place, args...)`, `in_place` when the handler
/// runs on the object's executor (it may then complete without a dispatch).
template <class Token, class Signature, class Object, class Start, class... Args>
auto async_initiate_erased(const Object& object, Start start, std::type_identity_t<Token>& token, Args&&... args) {
  auto erase = [&object, start = std::move(start)](auto handler, auto&&... a) {
    bool in_place = runs_on(handler, object.get_executor());
    start(boost::asio::any_completion_handler<Signature>(std::move(handler)), in_place,
          std::forward<decltype(a)>(a)...);
  };
  return async_initiate_on<Token, Signature>(object, std::move(erase), token, std::forward<Args>(args)...);
}

}  // namespace dlock::detail
