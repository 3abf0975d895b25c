#include <dlock/lock_loss.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstdint>
#include <list>
#include <mutex>
#include <vector>

namespace dlock {

// Everything below `mutex` is guarded by it. Nothing runs user code while
// holding it: completions are posted, signals emitted after unlocking (an
// emission runs cancellation handlers, which may bind or unbind).
struct lock_loss::state : std::enable_shared_from_this<lock_loss::state> {
  using handler_type = asio::any_completion_handler<void(error_code)>;
  struct waiter {
    std::uint64_t id;
    handler_type handler;
  };
  struct binding {
    std::uint64_t id;
    asio::cancellation_signal* signal;
    asio::cancellation_type type;
    asio::any_io_executor executor;
  };

  explicit state(asio::any_io_executor ex) : executor(std::move(ex)) {}

  const asio::any_io_executor executor;  // the lock's: the fallback for completions

  std::mutex mutex;
  // A list, and handlers only ever move-constructed (nodes are spliced out):
  // Boost 1.81's any_completion_handler move *assignment* copies its operand
  // through the converting constructor, wrapping the handler in another
  // one, so assignments (or a vector's relocations) nest them ever deeper.
  std::list<waiter> waiters;
  std::vector<binding> bindings;  // for the current (or next) hold
  std::vector<binding> emitting;  // fired: the emission is on its way to the binding's executor
  std::uint64_t next_id = 0;
  error_code reason;
  bool armed = false;

  void complete(handler_type handler, error_code ec) {
    asio::post(executor, asio::append(std::move(handler), ec));
  }

  std::list<waiter> take_waiters() {
    std::list<waiter> out;
    out.swap(waiters);
    return out;
  }

  // A waiter's cancellation: it may come from any thread, at any time, even
  // after the waiter completed (a slot keeps its handler) or this state is gone.
  static void abort_waiter(const std::weak_ptr<state>& weak, std::uint64_t id) {
    auto self = weak.lock();
    if (!self) return;
    std::list<waiter> taken;
    {
      std::lock_guard lock(self->mutex);
      // std::find_if, not std::ranges::find: libc++ 14 has no ranges::find.
      auto it = std::find_if(self->waiters.begin(), self->waiters.end(), [id](const waiter& w) { return w.id == id; });
      if (it == self->waiters.end()) return;
      taken.splice(taken.end(), self->waiters, it);
    }
    self->complete(std::move(taken.front().handler), asio::error::operation_aborted);
  }

  // On the binding's executor: emits unless unbound, released or re-armed meanwhile.
  static void emit(const std::weak_ptr<state>& weak, std::uint64_t id) {
    auto self = weak.lock();
    if (!self) return;
    asio::cancellation_signal* signal = nullptr;
    asio::cancellation_type type{};
    {
      std::lock_guard lock(self->mutex);
      auto it = std::find_if(self->emitting.begin(), self->emitting.end(), [id](const binding& b) { return b.id == id; });
      if (it == self->emitting.end()) return;
      signal = it->signal;
      type = it->type;
      self->emitting.erase(it);
    }
    signal->emit(type);
  }

  // Inline when already on the binding's executor (the common case: the
  // lock's own, where fire() runs), so the emission is not delayed.
  void schedule_emit(const binding& b) {
    asio::dispatch(b.executor, [weak = weak_from_this(), id = b.id] { emit(weak, id); });
  }
};

lock_loss::lock_loss(asio::any_io_executor executor) : state_(std::make_shared<state>(std::move(executor))) {}

asio::any_io_executor lock_loss::get_executor() const noexcept { return state_->executor; }

lock_loss::~lock_loss() {
  std::list<state::waiter> waiters;
  {
    std::lock_guard lock(state_->mutex);
    waiters = state_->take_waiters();
    state_->bindings.clear();
    state_->emitting.clear();
  }
  for (auto& w : waiters) state_->complete(std::move(w.handler), asio::error::operation_aborted);
}

bool lock_loss::lost() const noexcept {
  std::lock_guard lock(state_->mutex);
  return static_cast<bool>(state_->reason);
}

error_code lock_loss::reason() const noexcept {
  std::lock_guard lock(state_->mutex);
  return state_->reason;
}

bool lock_loss::armed() const noexcept {
  std::lock_guard lock(state_->mutex);
  return state_->armed;
}

// Runs on the caller's thread: the cancellation slot belongs to the caller,
// so it is hooked here, not on the lock's executor (a slot is not thread-safe).
void lock_loss::start_wait(asio::any_completion_handler<void(error_code)> handler) {
  auto slot = asio::get_associated_cancellation_slot(handler);
  error_code at_once;
  std::uint64_t id = 0;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->reason)
      at_once = state_->reason;
    else if (!state_->armed)
      at_once = error::not_held;
    else {
      id = state_->next_id++;
      state_->waiters.push_back({id, std::move(handler)});
    }
  }
  if (at_once) return state_->complete(std::move(handler), at_once);
  // Waiting for a loss is pure bookkeeping, so any cancellation type can be
  // honoured. The slot is never cleared from here: the waiter may complete on
  // another thread while the caller's side emits; a late emission finds no waiter.
  if (slot.is_connected()) {
    slot.assign([weak = std::weak_ptr<state>(state_), id](asio::cancellation_type type) {
      if (type != asio::cancellation_type::none) state::abort_waiter(weak, id);
    });
  }
}

void lock_loss::bind(asio::cancellation_signal& signal, asio::cancellation_type type) {
  bind(signal, state_->executor, type);
}

void lock_loss::bind(asio::cancellation_signal& signal, asio::any_io_executor executor,
                     asio::cancellation_type type) {
  state::binding b{0, &signal, type, std::move(executor)};
  {
    std::lock_guard lock(state_->mutex);
    b.id = state_->next_id++;
    if (!state_->reason) {
      state_->bindings.push_back(std::move(b));
      return;
    }
    state_->emitting.push_back(b);
  }
  state_->schedule_emit(b);
}

void lock_loss::unbind(asio::cancellation_signal& signal) noexcept {
  std::lock_guard lock(state_->mutex);
  auto same = [&](const state::binding& b) { return b.signal == &signal; };
  std::erase_if(state_->bindings, same);
  std::erase_if(state_->emitting, same);
}

void lock_loss::arm() {
  std::lock_guard lock(state_->mutex);
  state_->reason = {};
  state_->armed = true;
  state_->emitting.clear();  // a previous hold's loss must not reach this one
}

void lock_loss::fire(error_code reason) {
  std::list<state::waiter> waiters;
  std::vector<state::binding> bound;
  {
    std::lock_guard lock(state_->mutex);
    if (!state_->armed) return;
    state_->armed = false;
    state_->reason = reason = reason ? reason : make_error_code(error::lost);
    waiters = state_->take_waiters();
    bound.swap(state_->bindings);
    state_->emitting.insert(state_->emitting.end(), bound.begin(), bound.end());
  }
  for (auto& w : waiters) state_->complete(std::move(w.handler), reason);
  for (auto& b : bound) state_->schedule_emit(b);
}

void lock_loss::disarm() {
  std::list<state::waiter> waiters;
  {
    std::lock_guard lock(state_->mutex);
    state_->armed = false;
    state_->bindings.clear();
    state_->emitting.clear();
    waiters = state_->take_waiters();
  }
  for (auto& w : waiters) state_->complete(std::move(w.handler), asio::error::operation_aborted);
}

}  // namespace dlock
