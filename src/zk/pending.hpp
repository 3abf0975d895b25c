// A handler waiting for a result that the session's strand will produce:
// an operation's reply, a watch event, a state change.
//
// Completion is idempotent and never inline: it is posted to the handler's
// associated executor, or, for results produced while the session drains the
// C client, collected in a completion_batch and dispatched once the drain is
// over (outside the C call, still on the strand: one handler less per reply).
// Terminal and partial cancellation forward to the
// strand and complete the handler with operation_aborted; a reply arriving
// later finds it done and is dropped. The slot is cleared on the handler's
// executor, just before the handler runs, which is where Asio expects the
// cancellation signal to be emitted from.
#pragma once

#include "detail/op_base.hpp"

#include <dlock/zk/client.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <deque>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

namespace dlock::zk::detail {

using strand_type = asio::strand<asio::any_io_executor>;

class pending_base : public std::enable_shared_from_this<pending_base> {
 public:
  explicit pending_base(strand_type strand) : strand_(std::move(strand)) {}
  virtual ~pending_base() = default;
  pending_base(const pending_base&) = delete;
  pending_base& operator=(const pending_base&) = delete;

  const strand_type& strand() const noexcept { return strand_; }

  /// The C client's hold on this object, between a zoo_a* call and its completion.
  std::shared_ptr<pending_base> c_hold;

  /// Runs the handler with the recorded result: `post` queues it, else it is
  /// dispatched (may run in place). Strand only.
  virtual void deliver(bool post) = 0;

 protected:
  /// Strand only: called for a terminal or partial cancellation.
  virtual void on_cancel() = 0;

 private:
  strand_type strand_;
};

/// Installed by session::drain on its thread for the drain's duration: the
/// completions recorded meanwhile (inside C callbacks, where the process-wide
/// C client lock is held) are delivered by `run()` once the drain is over.
class completion_batch {
 public:
  completion_batch() : outer_(current_) { current_ = this; }
  /// Whatever `run()` did not reach (a handler threw) is posted.
  ~completion_batch() {
    end_collecting();
    for (auto& p : ready_) p->deliver(true);
  }
  completion_batch(const completion_batch&) = delete;
  completion_batch& operator=(const completion_batch&) = delete;

  static completion_batch* current() noexcept { return current_; }
  void add(std::shared_ptr<pending_base> p) { ready_.push_back(std::move(p)); }

  /// After the C calls: stop collecting, deliver in order (new completions
  /// recorded by the handlers themselves are posted as usual).
  void run() {
    end_collecting();
    while (!ready_.empty()) {
      auto next = std::move(ready_.front());
      ready_.pop_front();
      next->deliver(false);
    }
  }

 private:
  void end_collecting() {
    if (current_ == this) current_ = outer_;
  }

  inline static thread_local completion_batch* current_ = nullptr;
  completion_batch* outer_;
  std::deque<std::shared_ptr<pending_base>> ready_;
};

template <class... Args>
class pending : public pending_base {
 public:
  pending(strand_type strand, handler<Args...> h) : pending_base(std::move(strand)), op_(std::move(h)) {}

  /// Call once the object is owned by a shared_ptr: cancellation is forwarded
  /// to the strand (posted) and calls on_cancel there.
  void start_cancellation() {
    op_.hook_cancellation(strand(), [weak = weak_from_this()](asio::cancellation_type) {
      if (auto self = weak.lock()) static_cast<pending*>(self.get())->on_cancel();
    });
  }

  /// Strand only: true once a result (or the abort) was recorded.
  bool done() const noexcept { return op_.done(); }

  /// Strand only (or before the operation reached the strand, when nothing else
  /// can touch it). Records the result once and delivers it (see above).
  void complete(error_code ec, Args... args) {
    if (!op_.settle()) return;
    result_.emplace(ec, std::move(args)...);
    if (auto* batch = completion_batch::current()) return batch->add(shared_from_this());
    deliver(true);
  }

  void deliver(bool post) override {
    // Through the strand, then dispatched to the handler's executor (Asio's
    // usual completion path; any_completion_executor cannot be posted to directly).
    auto ex = asio::get_associated_executor(op_.handler(), strand());
    auto self = std::static_pointer_cast<pending>(shared_from_this());
    auto invoke = asio::bind_executor(ex, [self = std::move(self)]() mutable { self->invoke(); });
    if (post) return asio::post(strand(), std::move(invoke));
    asio::dispatch(strand(), std::move(invoke));
  }

  void abort() { complete(asio::error::operation_aborted, Args{}...); }

 protected:
  void on_cancel() override { abort(); }

 private:
  // On the handler's executor: the slot is released there, just before the handler runs.
  void invoke() {
    auto handler = op_.take_handler();
    auto result = std::move(*result_);
    result_.reset();
    std::apply([&handler](auto&&... values) { std::move(handler)(std::move(values)...); }, std::move(result));
  }

  dlock::detail::op_base<void(error_code, Args...)> op_;
  std::optional<std::tuple<error_code, Args...>> result_;
};

template <class... Args>
using pending_ptr = std::shared_ptr<pending<Args...>>;

template <class P, class... A>
std::shared_ptr<P> make_pending(A&&... a) {
  auto p = std::make_shared<P>(std::forward<A>(a)...);
  p->start_cancellation();
  return p;
}

}  // namespace dlock::zk::detail
