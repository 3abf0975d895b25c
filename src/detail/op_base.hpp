// The one base of dlock's hand-written asynchronous operations, in the spirit
// of Beast's async_base: what every operation re-wrote before, written once.
//
// An op_base<void(error_code, T...)> owns
//  - the caller's handler, type-erased (any_completion_handler);
//  - the hook-up of the handler's cancellation slot: a signal of a type the
//    operation honours (terminal and partial unless it says otherwise) is
//    forwarded to the operation's executor or strand (posted, or dispatched)
//    and calls the operation's on_cancel there;
//  - complete-once (settle(): the first outcome wins, later ones are dropped);
//  - the slot's release just before the handler runs, except after an
//    outcome decided by the slot's own signal (releasing it could destroy
//    the signal's handler mid-call, on the emitter's thread);
//  - completion by post, dispatch or in place (see dlock::detail::completion
//    and ARCHITECTURE.md's performance invariants: in place is what keeps a
//    reply's continuation on the same read);
//  - and, in error_from(), the one exception -> error_code mapping.
//
// No work guard is kept: a posted or dispatched completion carries the
// handler, and Asio tracks work on the handler's own executor until it runs.
// Nothing here allocates: the slot's forwarder lives in the slot's own
// (recycled) memory, and completing moves the handler out.
//
// Use, for an operation kept alive by a shared_ptr and driven on `strand`:
//
//   class my_op : public std::enable_shared_from_this<my_op> {
//     dlock::detail::op_base<void(error_code, int)> op_;
//    public:
//     explicit my_op(handler_type h) : op_(std::move(h)) {}
//     void start() {   // in the initiating call, so no early cancel is missed
//       op_.hook_cancellation(strand_, [weak = weak_from_this()](asio::cancellation_type t) {
//         if (auto self = weak.lock()) self->on_cancel(t);   // runs on strand_
//       });
//       ...
//     }
//     void on_reply(error_code ec, int v) { op_.complete(completion::dispatch, strand_, ec, v); }
//   };
//
// Operations that record a result first and deliver it later (the ZooKeeper
// session's completion batch) use settle() and take_handler() separately.
#pragma once

#include <dlock/config.hpp>
#include <dlock/error.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

#include <exception>
#include <new>
#include <optional>
#include <utility>

namespace dlock::detail {

// ---- completing a handler ----
// On its associated executor (`fallback` when it has none). Which form to
// use is a matter of where the caller stands.

/// From an initiating function (or while walking shared state): never in place.
template <class Handler, class... Args>
void post_completion(const boost::asio::any_io_executor& fallback, Handler&& h, Args&&... args) {
  boost::asio::post(fallback, boost::asio::append(std::forward<Handler>(h), std::forward<Args>(args)...));
}

/// From a reply, a timer or a cancellation: in place when that executor is
/// the one running this thread.
template <class Handler, class... Args>
void dispatch_completion(const boost::asio::any_io_executor& fallback, Handler&& h, Args&&... args) {
  boost::asio::dispatch(fallback, boost::asio::append(std::forward<Handler>(h), std::forward<Args>(args)...));
}

/// From a handler running on `fallback`'s executor: in place when `in_place`
/// (decided at initiation: the handler runs on that executor, see runs_on),
/// else as dispatch_completion. Same outcome as dispatch, without its hops.
template <class Handler, class... Args>
void complete_from_handler(bool in_place, const boost::asio::any_io_executor& fallback, Handler&& h, Args&&... args) {
  if (in_place) return std::forward<Handler>(h)(std::forward<Args>(args)...);
  dispatch_completion(fallback, std::forward<Handler>(h), std::forward<Args>(args)...);
}

/// This thread is running `ex`'s io_context now (false for any other kind
/// of executor, a strand included: then only asio::dispatch knows).
inline bool running_on(const boost::asio::any_io_executor& ex) noexcept {
  auto* io = ex.target<boost::asio::io_context::executor_type>();
  return io && io->running_in_this_thread();
}

/// asio::dispatch(ex, f), which runs `f` in place when this thread runs
/// `ex`'s io_context; this says so first, and then calls `f` itself, without
/// wrapping it for the type-erased executor (an initiation's common case:
/// a coroutine on the lock's own executor).
template <class Function>
void dispatch_here(const boost::asio::any_io_executor& ex, Function&& f) {
  if (running_on(ex)) return std::forward<Function>(f)();
  boost::asio::dispatch(ex, std::forward<Function>(f));
}

// ---- the op base ----

/// How an outcome reaches the handler. `post`: never inside the current call
/// (initiating functions, walks over shared state, cancellations).
/// `dispatch`: in place when the fallback executor runs this thread.
/// `in_place`: called here, for a handler known at initiation to run on the
/// executor this code runs on (see runs_on in dlock/detail/in_place.hpp).
enum class completion { post, dispatch, in_place };

/// How a cancellation signal reaches the operation's executor.
enum class forwarding { post, dispatch };

inline constexpr asio::cancellation_type terminal_or_partial =
    asio::cancellation_type::terminal | asio::cancellation_type::partial;

/// The one exception -> error_code mapping: a system_error keeps its code,
/// an allocation failure is not_enough_memory, anything else
/// state_not_recoverable (the operation's state is unknown).
inline error_code error_from(const std::exception_ptr& failure) noexcept {
  try {
    std::rethrow_exception(failure);
  } catch (const boost::system::system_error& e) {
    return e.code();
  } catch (const std::bad_alloc&) {
    return make_error_code(boost::system::errc::not_enough_memory);
  } catch (...) {
    return make_error_code(boost::system::errc::state_not_recoverable);
  }
}

/// Whose forwarded signal is being handled on this thread. An outcome decided
/// by the slot's own signal leaves the slot alone: the signal's handler may
/// still be running (a dispatched forward runs inside it), on the emitter's
/// thread, which owns the slot; a later emission finds the operation done.
struct slot_emission {
  static inline thread_local asio::cancellation_slot current{};

  explicit slot_emission(asio::cancellation_slot s) noexcept : outer_(current) { current = s; }
  ~slot_emission() { current = outer_; }
  slot_emission(const slot_emission&) = delete;
  slot_emission& operator=(const slot_emission&) = delete;

 private:
  asio::cancellation_slot outer_;
};

template <class Signature>
class op_base;

template <class... Args>
class op_base<void(error_code, Args...)> {
 public:
  using handler_type = asio::any_completion_handler<void(error_code, Args...)>;

  /// No handler: an operation nobody waits for (its completions are dropped).
  op_base() = default;
  /// An empty `handler` counts as none.
  explicit op_base(handler_type handler) {
    if (handler) handler_.emplace(std::move(handler));
  }
  op_base(op_base&&) = default;
  // any_completion_handler's move assignment is broken in Boost 1.81 (it
  // wraps its operand in another handler): never assigned, only re-set.
  op_base& operator=(op_base&&) = delete;

  /// A new handler for a reused operation (the previous one was taken).
  void reset(handler_type handler) {
    handler_.reset();
    if (handler) handler_.emplace(std::move(handler));
    slot_ = {};
    done_ = false;
  }
  /// Drops the handler uncompleted (an operation recycled after its owner left).
  void clear() noexcept {
    handler_.reset();
    slot_ = {};
  }

  bool has_handler() const noexcept { return handler_.has_value(); }
  /// For its associated executor or allocator. Precondition: has_handler().
  const handler_type& handler() const noexcept { return *handler_; }
  /// True once an outcome was decided.
  bool done() const noexcept { return done_; }
  /// Complete-once: true the first time only; the caller then delivers.
  bool settle() noexcept { return !std::exchange(done_, true); }

  /// The handler's associated cancellation slot (unconnected when none).
  asio::cancellation_slot handler_slot() const {
    return handler_ ? asio::get_associated_cancellation_slot(*handler_) : asio::cancellation_slot();
  }

  /// Hooks the handler's slot (call it in the initiating function: a signal
  /// emitted before the operation reaches its executor is then not lost). A
  /// signal of a type in `honoured` runs `on_cancel(type)` on `where`,
  /// posted or dispatched; `on_cancel` should hold the operation weakly.
  template <class Executor, class OnCancel>
  void hook_cancellation(const Executor& where, OnCancel on_cancel, forwarding how = forwarding::post,
                         asio::cancellation_type honoured = terminal_or_partial) {
    slot_ = handler_slot();
    if (slot_.is_connected())
      slot_.template emplace<forwarder<Executor, OnCancel>>(where, std::move(on_cancel), how, honoured, slot_);
  }

  /// Takes the handler to run it now (on its executor, or about to be handed
  /// to it): the slot is released first. Precondition: has_handler().
  handler_type take_handler() {
    release_slot();
    handler_type handler(std::move(*handler_));
    handler_.reset();
    return handler;
  }

  /// Completes once (a later call, or one without a handler, does nothing).
  /// The values are forwarded, not copied: a reply goes to the handler by moves only.
  template <class... Values>
  void complete(completion how, const asio::any_io_executor& fallback, error_code ec, Values&&... values) {
    if (!settle() || !handler_) return;
    deliver(how, fallback, take_handler(), ec, std::forward<Values>(values)...);
  }

  /// Runs `handler` as `how` says, `fallback` standing for a handler without
  /// an associated executor.
  template <class... Values>
  static void deliver(completion how, const asio::any_io_executor& fallback, handler_type handler, error_code ec,
                      Values&&... values) {
    switch (how) {  // one branch runs: each forwards once
      case completion::post:
        return post_completion(fallback, std::move(handler), ec, std::forward<Values>(values)...);
      case completion::dispatch:
        return dispatch_completion(fallback, std::move(handler), ec, std::forward<Values>(values)...);
      case completion::in_place:
        return std::move(handler)(ec, std::forward<Values>(values)...);
    }
  }

 private:
  // A constructor, not an aggregate: the slot's emplace builds it with
  // parentheses, which clang accepts for aggregates only from 16.
  template <class Executor, class OnCancel>
  struct forwarder {
    forwarder(Executor where_, OnCancel on_cancel_, forwarding how_, asio::cancellation_type honoured_,
              asio::cancellation_slot self_)
        : where(std::move(where_)), on_cancel(std::move(on_cancel_)), how(how_), honoured(honoured_), self(self_) {}

    Executor where;
    OnCancel on_cancel;
    forwarding how;
    asio::cancellation_type honoured;
    asio::cancellation_slot self;

    void operator()(asio::cancellation_type type) {
      if ((type & honoured) == asio::cancellation_type::none) return;
      auto call = [fn = on_cancel, type, slot = self]() mutable {
        slot_emission emitting(slot);
        fn(type);
      };
      if (how == forwarding::post) return asio::post(where, std::move(call));
      asio::dispatch(where, std::move(call));
    }
  };

  void release_slot() noexcept {
    if (slot_.is_connected() && !(slot_ == slot_emission::current)) slot_.clear();
    slot_ = {};
  }

  std::optional<handler_type> handler_;
  asio::cancellation_slot slot_;  // hooked, until the handler is taken
  bool done_ = false;
};

}  // namespace dlock::detail
