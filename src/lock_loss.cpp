#include <dlock/lock_loss.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>

namespace dlock {

lock_loss::lock_loss(asio::any_io_executor executor) : executor_(std::move(executor)) {}

lock_loss::~lock_loss() { complete_all(asio::error::operation_aborted); }

void lock_loss::start_wait(asio::any_completion_handler<void(error_code)> handler) {
  waiters_.push_back({std::move(handler), {}});
  auto it = std::prev(waiters_.end());
  if (reason_) return complete(it, reason_);
  if (!armed_) return complete(it, error::not_held);
  it->slot = asio::get_associated_cancellation_slot(it->handler);
  if (it->slot.is_connected()) {
    // Waiting for a loss is pure bookkeeping, so any cancellation type can be honoured.
    it->slot.assign([this, it](asio::cancellation_type) {
      complete(it, asio::error::operation_aborted, /*from_slot=*/true);
    });
  }
}

// Completions are posted, never run inline: the caller may be inside
// fire()/disarm(), called from the lock's own completion path.
void lock_loss::complete(std::list<waiter>::iterator it, error_code ec, bool from_slot) {
  auto handler = std::move(it->handler);
  // A slot handler must not be cleared while it runs (it would destroy itself).
  if (!from_slot && it->slot.is_connected()) it->slot.clear();
  waiters_.erase(it);
  // post() runs it on the handler's own associated executor.
  asio::post(executor_, asio::append(std::move(handler), ec));
}

void lock_loss::complete_all(error_code ec) {
  while (!waiters_.empty()) complete(waiters_.begin(), ec);
}

void lock_loss::bind(asio::cancellation_signal& signal, asio::cancellation_type type) {
  if (reason_) {
    signal.emit(type);
    return;
  }
  bindings_.push_back({&signal, type});
}

void lock_loss::unbind(asio::cancellation_signal& signal) noexcept {
  std::erase_if(bindings_, [&](const binding& b) { return b.signal == &signal; });
}

void lock_loss::arm() {
  reason_ = {};
  armed_ = true;
}

void lock_loss::fire(error_code reason) {
  if (!armed_) return;
  armed_ = false;
  reason_ = reason ? reason : make_error_code(error::lost);
  complete_all(reason_);
  // Emitting runs the bound operations' cancellation handlers, which may
  // bind or unbind: work on a copy.
  auto bound = std::move(bindings_);
  bindings_.clear();
  for (auto& b : bound) b.signal->emit(b.type);
}

void lock_loss::disarm() {
  armed_ = false;
  bindings_.clear();
  complete_all(asio::error::operation_aborted);
}

}  // namespace dlock
