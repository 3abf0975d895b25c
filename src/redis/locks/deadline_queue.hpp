// One timer for the per-master deadline of every fan-out of a lock. They
// all use the same timeout, so they expire in the order they were armed:
// the timer is set once per timeout period, not twice per fan-out (a
// syscall each). The queue does not own: pending commands keep a fan-out
// alive, not its deadline (else a fan-out and its lock would keep each
// other alive if the io_context stopped before they finished).
#pragma once

#include <dlock/config.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/intrusive/list.hpp>

#include <chrono>
#include <memory>

namespace dlock::redis::detail {

class fanout;

/// A fan-out's place in the queue. It lives inside the fan-out, so watching
/// one allocates nothing and touches no other object; the fan-out leaves
/// the queue when answered, expired or destroyed.
struct deadline_entry : boost::intrusive::list_base_hook<> {
  std::chrono::steady_clock::time_point due{};
  fanout* op = nullptr;
};

class deadline_queue {
 public:
  /// `timeout` zero: no deadline (timed() is false).
  deadline_queue(asio::any_io_executor executor, std::chrono::milliseconds timeout);
  /// The timer's wake-ups act only while `owner` (which holds this queue) lives.
  void attach(std::weak_ptr<void> owner) { owner_ = std::move(owner); }
  bool timed() const noexcept { return timeout_ > std::chrono::milliseconds::zero(); }
  void watch(deadline_entry& entry);
  void unwatch(deadline_entry& entry) noexcept;

 private:
  void arm();
  void on_timer();

  boost::intrusive::list<deadline_entry> entries_;
  asio::steady_timer timer_;
  std::chrono::milliseconds timeout_;
  bool armed_ = false;
  std::weak_ptr<void> owner_;
};

}  // namespace dlock::redis::detail
