// Asio keeps a few freed cancellation handlers per thread for reuse, so a use
// after free of one stays invisible to ASan. Tests that free a handler on
// purpose fill that cache first: the next one freed goes back to the heap,
// where ASan watches it.
#pragma once

#include <boost/asio/cancellation_signal.hpp>

namespace dlock::test {

inline void fill_asios_handler_cache() {
  struct nothing {
    void operator()(boost::asio::cancellation_type) {}
  };
  boost::asio::cancellation_signal a, b, c;
  a.slot().emplace<nothing>();
  b.slot().emplace<nothing>();
  c.slot().emplace<nothing>();
}

}  // namespace dlock::test
