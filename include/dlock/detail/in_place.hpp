// Whether a completion handler may be invoked in place by dlock.
#pragma once

#include <dlock/detail/require_cxx20.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>

#include <type_traits>

namespace dlock::detail {

/// Decided at initiation, while the handler's type is still known: true when
/// its associated executor is `ex`, the executor the object runs on. A reply
/// handled on `ex` may then invoke it in place, which is what
/// asio::dispatch would do, minus two type-erased executor hops and their
/// allocations once the handler has been type-erased.
template <class Handler>
bool runs_on(const Handler& handler, const boost::asio::any_io_executor& ex) {
  using associated = boost::asio::associated_executor_t<Handler, boost::asio::any_io_executor>;
  if constexpr (std::is_same_v<associated, boost::asio::any_io_executor>)
    return boost::asio::get_associated_executor(handler, ex) == ex;
  else
    return false;  // another executor type: never the same one
}

}  // namespace dlock::detail
