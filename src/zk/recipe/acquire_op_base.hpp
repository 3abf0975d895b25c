// What every ZooKeeper acquire shell shares, written once: the locks' one
// shell (src/zk/locks/acquire_shell.cpp) and the semaphore's
// (src/zk/semaphore/acquire_shell.cpp) differ in their state machines only.
// Here: the caller's handler and its cancellation slot, the acquire_for
// deadline, what the observer is told, and the I/O both shells perform alike
// (ensuring a path, waiting on a watch, the backoff's sleep). Everything
// runs on the client's strand, except hook_cancellation.
#pragma once

#include "detail/observed_lock.hpp"
#include "detail/op_base.hpp"
#include "zk/locks/acquire_steps.hpp"  // reply, step_result

#include <dlock/error.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/watch.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dlock::zk::detail {

/// What a ZooKeeper reply means to the recipe.
step_result classify(const error_code& ec) noexcept;

/// Parent paths to ensure, outermost first ("/a", "/a/b", ... `path`).
std::vector<std::string> path_prefixes(const std::string& path);

class acquire_op_base : public std::enable_shared_from_this<acquire_op_base> {
 public:
  /// `zk` and `observed` belong to the lock's or semaphore's core, which the
  /// derived shell keeps alive (it holds the core) for as long as this lives.
  acquire_op_base(client& zk, asio::any_io_executor strand, const dlock::detail::observed_lock& observed,
                  asio::any_completion_handler<void(error_code)> handler);
  virtual ~acquire_op_base() = default;

  /// In the initiating call: route cancellation from the handler's slot (so a
  /// cancel emitted before the operation reaches the strand is not missed).
  void hook_cancellation();
  /// On the strand, first: the acquire reached the lock (told to the observer).
  void starting(bool waits);
  /// The acquire may go ahead (`limit` > 0 arms a deadline): run().
  void begin(std::chrono::steady_clock::duration limit);
  /// The acquire is refused before anything is sent.
  void refuse(error_code ec);
  /// The caller gave up (or the object went away) with `reason`.
  virtual void cancel(error_code reason) = 0;

 protected:
  virtual void run() = 0;
  /// The core's part of the end, after the observer was told and before the
  /// caller's handler runs.
  virtual void settle(error_code ec) = 0;
  /// The fencing token the observer is told of with the outcome.
  virtual std::int64_t reported_token() const noexcept { return 0; }

  /// Completes the caller's handler once (later calls are ignored).
  void complete(error_code ec);
  bool completed() const noexcept { return op_.done(); }
  /// A node creation was sent (what the observer counts as an attempt).
  void count_attempt() noexcept { ++attempts_; }

  template <class F>
  asio::executor_binder<std::decay_t<F>, asio::any_io_executor> on_strand(F&& f) {
    return asio::bind_executor(strand_, std::forward<F>(f));
  }

  /// Creates `path` and every missing ancestor as containers, pipelined:
  /// replies come in order, so the last one says whether the path exists
  /// now. Then path_ensured(), with the first failure other than NODEEXISTS.
  void ensure_path(const std::string& path);
  virtual void path_ensured(reply r) = 0;

  /// Waits for watch_ to fire (or to be cancelled): then watch_fired().
  void wait_for_watch();
  virtual void watch_fired(reply r) = 0;

  /// Sleeps `delay` and a jitter, then slept(); interrupt_sleep() ends it early.
  void sleep(std::chrono::milliseconds delay);
  void interrupt_sleep();
  virtual void slept() = 0;

  zk::watch watch_;  // the one watch an acquire waits on at a time

 private:
  void report(error_code ec) const;

  client& zk_;
  asio::any_io_executor strand_;
  const dlock::detail::observed_lock& observed_;
  dlock::detail::op_base<void(error_code)> op_;
  std::optional<asio::steady_timer> deadline_, sleep_;
  std::chrono::steady_clock::time_point started_{};  // when observed
  std::uint32_t attempts_ = 0;
  std::size_t ensures_pending_ = 0;
  error_code ensure_error_;
};

}  // namespace dlock::zk::detail
