// A handler waiting for a result that the session's strand will produce:
// an operation's reply, a watch event, a state change.
//
// Completion is idempotent and always posted to the handler's associated
// executor (never inline). Terminal and partial cancellation forward to the
// strand and complete the handler with operation_aborted; a reply arriving
// later finds it done and is dropped. The slot is cleared on the handler's
// executor, just before the handler runs, which is where Asio expects the
// cancellation signal to be emitted from.
#pragma once

#include <dlock/zk/client.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

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

  /// Strand only: true once a result (or the abort) was recorded.
  bool done() const noexcept { return done_; }
  const strand_type& strand() const noexcept { return strand_; }

  /// The C client's hold on this object, between a zoo_a* call and its completion.
  std::shared_ptr<pending_base> c_hold;

 protected:
  /// Strand only: called for a terminal or partial cancellation.
  virtual void on_cancel() = 0;

  void connect_slot(asio::cancellation_slot slot) {
    slot_ = slot;
    if (slot_.is_connected()) slot_.template emplace<forwarder>(weak_from_this());
  }

  bool done_ = false;
  asio::cancellation_slot slot_;

 private:
  struct forwarder {
    std::weak_ptr<pending_base> target;
    void operator()(asio::cancellation_type_t type) const {
      if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
          asio::cancellation_type::none)
        return;
      if (auto t = target.lock()) {
        auto& strand = t->strand_;
        asio::post(strand, [t = std::move(t)] { t->on_cancel(); });
      }
    }
  };
  strand_type strand_;
};

template <class... Args>
class pending : public pending_base {
 public:
  pending(strand_type strand, handler<Args...> h) : pending_base(std::move(strand)), handler_(std::move(h)) {}

  /// Call once the object is owned by a shared_ptr.
  void start_cancellation() { connect_slot(asio::get_associated_cancellation_slot(handler_)); }

  /// Strand only (or before the operation reached the strand, when nothing else
  /// can touch it). Records the result once and posts the handler.
  void complete(error_code ec, Args... args) {
    if (done_) return;
    done_ = true;
    result_.emplace(ec, std::move(args)...);
    // Through the strand, then dispatched to the handler's executor (Asio's
    // usual completion path; any_completion_executor cannot be posted to directly).
    auto ex = asio::get_associated_executor(handler_, strand());
    auto self = std::static_pointer_cast<pending>(shared_from_this());
    asio::post(strand(), asio::bind_executor(ex, [self = std::move(self)]() mutable { self->invoke(); }));
  }

  void abort() { complete(asio::error::operation_aborted, Args{}...); }

 protected:
  void on_cancel() override { abort(); }

 private:
  void invoke() {
    if (slot_.is_connected()) slot_.clear();
    auto result = std::move(*result_);
    result_.reset();
    std::apply([this](auto&&... values) { std::move(handler_)(std::move(values)...); }, std::move(result));
  }

  handler<Args...> handler_;
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
