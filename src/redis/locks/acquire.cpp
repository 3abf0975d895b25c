// The Redlock algorithm (redis.io/docs/manual/patterns/distributed-locks),
// read top to bottom:
//
//  1. Take a fresh random token and the time `start`.
//  2. Send `SET key token NX PX ttl` to every master at once, each with a
//     short per-master timeout (a fan-out: connection_api.hpp).
//  3. The attempt is won when a majority (N/2 + 1) said yes while validity
//     is left: ttl - (now - start) - drift (algorithm/round.hpp, timing.hpp).
//     It is lost the moment a majority is out of reach.
//  4. With fencing, each master's SET is a script that also counts the hold
//     on the key's counter; the round waits until the counters it saw cover
//     a majority, takes the largest as the token, and writes it back to the
//     masters behind it until a majority holds it (algorithm/round.hpp has the
//     argument).
//  5. Won: the lock is held for that validity (hold.hpp).
//     Lost: delete the token on every master (a SET may have landed without
//     its yes reaching us), pause a random delay, try again, until the
//     retries or the wait run out (algorithm/acquire_machine.hpp decides).
//
// No attempt is sent while a delete of an earlier one is unanswered, and
// every attempt has its own token, so a delete can only ever remove the keys
// of the attempt it belongs to.
#include "redis/locks/engine.hpp"

#include "detail/op_base.hpp"
#include "redis/locks/algorithm/acquire_machine.hpp"
#include "redis/locks/token.hpp"

#include <dlock/log.hpp>
#include <dlock/limits.hpp>


#include <cstdint>

namespace dlock::redis::detail {
namespace {

using std::chrono::milliseconds;
using handler0 = asio::any_completion_handler<void(error_code)>;
using kind = acquire_action::kind;

class lock_op;

/// Step 2 and 3: one attempt, `SET key token NX PX ttl` on every master,
/// decided by a round (what each answer asks is algorithm/attempt.hpp's).
class acquire_attempt final : public round_fanout {
 public:
  acquire_attempt(std::shared_ptr<lock_engine> owner, std::shared_ptr<lock_op> op)
      : round_fanout(owner, round_kind::acquire, owner->options.ttl, recent_now()),
        op_(std::move(op)),
        token_(make_token_text()) {}

  void start() {
    owner_->commands.attempt(command(), token(), owner_->options.ttl);
    owner_->granted.attempt_sent(owner_->master_epochs());
    send_to_all();
    arm_deadline();
  }

  /// The acquire was cancelled: forget it, abandon what is still pending.
  void abandon() {
    op_.reset();
    abandon_pending();
  }

  const redlock_attempt& decision() const noexcept { return attempt_; }
  std::string_view token() const noexcept { return token_.view(); }

 private:
  std::string_view round_token() const noexcept override { return token(); }
  void decided() override;
  void write_back();
  void written_back(error_code ec);

  std::shared_ptr<lock_op> op_;
  token_text token_;  // fresh for every attempt
};

/// One acquire: the acquire machine's actions, until it holds the lock, gives
/// up, or is cancelled.
class lock_op : public std::enable_shared_from_this<lock_op> {
 public:
  lock_op(std::shared_ptr<lock_engine> owner, handler0 handler, bool retry, std::optional<milliseconds> wait,
          bool in_place)
      : owner_(std::move(owner)),
        op_(std::move(handler)),
        machine_(acquire_policy{retry, !owner_->commands.one_server()},
                 retry_schedule::for_acquire(owner_->options, wait, &redlock_clock::now)),
        wait_(wait),
        in_place_(in_place) {}

  // Called on the initiating thread: a cancellation is posted to the
  // executor, never run inside the emitter (cancel_after's timer: the
  // caller's handler would complete inside it, and the emitter's own state
  // be destroyed while it emits).
  void bind_cancellation() {
    auto any = asio::cancellation_type::terminal | asio::cancellation_type::partial | asio::cancellation_type::total;
    auto on_cancel = [weak = weak_from_this()](asio::cancellation_type) {
      if (auto self = weak.lock()) self->cancel();
    };
    op_.hook_cancellation(owner_->executor, on_cancel, dlock::detail::forwarding::post, any);
  }

  void start() {
    running_ = true;
    // Cancelled on the way here: the engine is not touched (another acquire may be under way).
    if (cancelled_early_) return op_.complete(dlock::detail::completion::post, owner_->executor,
                                              make_error_code(asio::error::operation_aborted));
    started_ = owner_->observed.started(machine_.policy().retry);
    if (auto refused = acquire_refusal(owner_->status(), wait_)) return complete(refused, in_initiation);
    owner_->acquiring = true;
    owner_->released = false;
    owner_->acquire_in_progress = weak_from_this();
    act(machine_.start(owner_->cleanups.in_flight()));
  }

  /// Step 4: the round of the current attempt was decided.
  void on_decided(acquire_attempt& attempt) {
    if (op_.done() || &attempt != current_.lock().get()) return;
    if (owner_->abandoned) return cancel();  // its handle is gone: nobody would release what it took
    const auto& round = attempt.decision().round();
    error_code failure = attempt.decision().won() ? error_code() : attempt.decision().failure();
    bool landed = attempt.decision().may_have_landed();
    // A fencing token that went back (a failover) is not given out: the attempt is taken again.
    if (!failure && owner_->fencing_went_back(round.fencing_token())) {
      failure = dlock::error::stale_token;
      landed = true;
    }
    bool won = !failure;
    if (!won && dlock::detail::log_enabled(log_level::debug))
      dlock::detail::log(log_level::debug, "lock " + owner_->commands.key + ": attempt failed (" +
                                               failure.message() + "): " + owner_->last_outcomes());
    // A lost attempt may have set keys whose yes never came back: delete them.
    // Only a retry's pause needs the time and a random draw.
    double random = won ? 0.0 : owner_->random_unit();
    auto now = won ? redlock_clock::time_point() : redlock_clock::now();
    // The round counted drift into its validity; the stall margin is the hold's.
    auto left = won ? round.validity_at_decision() - owner_->hold.stall_margin() : milliseconds::zero();
    auto action = machine_.attempt_decided(failure, landed, left, now, random);
    if (action.what == kind::complete && !action.result)
      owner_->begin_hold(attempt.token(), round.start(), round.fencing_token());
    act(action);
  }

  // The deletes run on handlers of their own: the caller's cancellation never reaches them.
  void cancel() {
    if (op_.done()) return;
    if (!running_) {
      cancelled_early_ = true;
      return;
    }
    if (auto attempt = current_.lock()) attempt->abandon();
    owner_->cleanups.forget(this);
    owner_->retry_pause.cancel();
    act(machine_.cancel());
  }

 private:
  void act(acquire_action action) {
    if (action.what == kind::none) return;
    auto attempt = std::exchange(current_, {}).lock();  // decided or abandoned: the next one is fresh
    if (action.delete_attempt && attempt) owner_->release_in_background(attempt->token());  // every master
    switch (action.what) {
      case kind::wait_for_cleanups:
        owner_->cleanups.after_settled(this, [self = shared_from_this()] { self->act(self->machine_.cleanups_settled()); });
        return;
      case kind::send_attempt:
        owner_->resend_unsettled_cleanups();  // ahead of this attempt's SETs, on the same connections
        ++attempts_;
      {
        auto next = make_fanout<acquire_attempt>(owner_, shared_from_this());
        current_ = next;  // its commands keep it: an io_context destroyed with one owed leaks no cycle
        return next->start();
      }
      case kind::pause:
        owner_->retry_pause.expires_after(action.pause);
        return owner_->retry_pause.async_wait([self = shared_from_this()](error_code ec) {
          if (ec) return;
          if (self->owner_->abandoned) return self->cancel();
          self->act(self->machine_.pause_over(self->owner_->cleanups.in_flight()));
        });
      case kind::complete:
        owner_->acquiring = false;
        return complete(action.result);
      case kind::none: return;
    }
  }

  static constexpr bool in_initiation = true;
  // Posted from an initiation, and when the handle is gone (never inside its destructor).
  void complete(error_code ec, bool initiating = false) {
    using dlock::detail::completion;
    bool post = initiating || owner_->abandoned;
    auto how = post ? completion::post : in_place_ ? completion::in_place : completion::dispatch;
    owner_->observed.finished(started_, ec, attempts_, ec ? 0 : owner_->hold.fencing_token());
    op_.complete(how, owner_->executor, ec);
  }

  std::shared_ptr<lock_engine> owner_;
  dlock::detail::op_base<void(error_code)> op_;
  acquire_machine machine_;
  std::optional<milliseconds> wait_;
  bool in_place_;  // the handler runs on the lock's executor
  std::weak_ptr<acquire_attempt> current_;
  bool running_ = false;          // start() ran
  bool cancelled_early_ = false;  // cancelled before start(): start() ends it
  redlock_clock::time_point started_{};  // when observed
  std::uint32_t attempts_ = 0;
};

void acquire_attempt::decided() {
  note_decision();
  report_decision();
  if (attempt_.round().state() == round_state::acquired && owner_->commands.fencing()) return write_back();
  if (op_) op_->on_decided(*this);
}

// Step 4: the masters behind the token are raised to it. The hold begins once
// a majority holds it; the ones beyond that are raised in the background.
void acquire_attempt::write_back() {
  auto needed = attempt_.write_back_needed();
  auto targets = attempt_.write_back_targets();
  std::function<void(error_code)> report;
  if (needed > 0) {
    auto self = std::static_pointer_cast<acquire_attempt>(shared_from_this());
    report = [self](error_code ec) { self->written_back(ec); };
  }
  // Nothing to write when every master holds the token (one server always).
  if (needed > 0 || !targets.empty())
    owner_->write_back(attempt_.round().fencing_token(), needed, targets, std::move(report));
  if (needed == 0 && op_) op_->on_decided(*this);
}

void acquire_attempt::written_back(error_code ec) {
  attempt_.written_back(ec, redlock_clock::now());
  if (op_) op_->on_decided(*this);
}

}  // namespace

void start_acquire(std::shared_ptr<lock_engine> owner, handler0 handler, bool retry,
                   std::optional<milliseconds> wait, bool in_place) {
  auto op = std::make_shared<lock_op>(owner, std::move(handler), retry, wait, in_place);
  op->bind_cancellation();
  dlock::detail::dispatch_here(owner->executor, [op = std::move(op)] { op->start(); });
}

void cancel_acquire(lock_engine& owner) {
  if (auto op = owner.acquire_in_progress.lock()) std::static_pointer_cast<lock_op>(op)->cancel();
}

}  // namespace dlock::redis::detail
