// extend(), release() and the end of a handle, for every Redis lock (one
// server or N masters): the engine's operations after the acquire
// (acquire.cpp). What a failed extension means is the attempt's to say
// (algorithm/attempt.hpp); the release quorum is release_tally's.
#include "redis/locks/engine.hpp"

#include "redis/locks/algorithm/options.hpp"

namespace dlock::redis::detail {
namespace {

using std::chrono::milliseconds;
using handler0 = asio::any_completion_handler<void(error_code)>;

// ------------------------------------------------------------------ extend_op

/// Compare-and-PEXPIRE on every master, decided at the majority.
class extend_op final : public round_fanout {
 public:
  extend_op(std::shared_ptr<lock_engine> owner, milliseconds ttl, handler0 handler)
      : round_fanout(owner, round_kind::extend, ttl, redlock_clock::now()),
        ttl_(ttl),
        hold_id_(owner_->hold.id()),
        op_(std::move(handler)) {}

  void start() {
    // Terminal cancellation ends the wait; the hold is left as it is (a
    // compare-and-PEXPIRE already written may still run).
    std::weak_ptr<fanout> weak = shared_from_this();
    auto on_cancel = [weak](asio::cancellation_type) {
      if (auto self = weak.lock()) static_cast<extend_op&>(*self).cancel();
    };
    // Posted, never run inside the emitter (see acquire.cpp).
    op_.hook_cancellation(owner_->executor, on_cancel, dlock::detail::forwarding::post,
                          asio::cancellation_type::terminal);
    owner_->commands.extend(command(), owner_->hold.token(), ttl_);
    send_to_all();
    arm_deadline();
  }

 private:
  std::string_view round_token() const noexcept override { return owner_->hold.token(); }
  void cancel() {
    if (op_.done()) return;
    abandon_pending();
    complete(asio::error::operation_aborted);
  }
  void decided() override {
    const auto& round = attempt_.round();
    report_decision();
    if (op_.done()) return;  // cancelled: the hold is left as it was
    auto refused = extend_refusal(owner_->status());  // released or lost meanwhile
    if (!refused && owner_->hold.id() != hold_id_) refused = dlock::error::not_held;  // and taken again
    if (refused) return complete(refused);
    note_decision();
    auto verdict = attempt_.extend_outcome(owner_->hold.stall_margin());
    if (!verdict.told) {
      owner_->hold.renew(round.start(), ttl_);
      return complete(error_code{});
    }
    owner_->hold.extension_failed(verdict.why);
    if (verdict.loses) owner_->hold.lose(verdict.told);
    complete(verdict.told);
  }
  void complete(error_code ec) { op_.complete(dlock::detail::completion::dispatch, owner_->executor, ec); }

  milliseconds ttl_;
  std::uint64_t hold_id_;
  dlock::detail::op_base<void(error_code)> op_;
};

// The hold ends; `then` runs once no extension of it is in flight (none may
// land after the delete): at once without auto-extension, so that the delete
// is queued ahead of whatever the lock sends next on the same connection.
template <class Then>
void end_hold_then(lock_engine& owner, Then then) {
  if (!owner.options.auto_extend) {
    owner.hold.end();
    return then(error_code());
  }
  owner.hold.end(handler0(std::move(then)));
}

void extend_here(std::shared_ptr<lock_engine> owner, milliseconds ttl, handler0 handler) {
  if (extend_ttl_invalid(ttl, owner->options.master_timeout))
    return post_completion(owner->executor, std::move(handler), make_error_code(dlock::error::invalid_argument));
  if (auto refused = extend_refusal(owner->status()))
    return post_completion(owner->executor, std::move(handler), refused);
  auto op = make_fanout<extend_op>(std::move(owner), ttl, std::move(handler));
  op->start();
}

void release_here(std::shared_ptr<lock_engine> owner, handler0 h, bool in_place) {
  auto plan = plan_release(owner->status());
  auto told = plan.tell_loss ? owner->hold.loss().reason() : plan.told;
  if (plan.what == release_plan::step::end_and_tell) {
    owner->hold.end();  // stops auto-extension too
    owner->released = true;
    owner->released_masters = 0;
  }
  if (plan.what != release_plan::step::send) return post_completion(owner->executor, std::move(h), told);
  owner->released = true;
  owner->releasing = true;  // no acquire until it completes
  auto& engine = *owner;
  // The hold's token stays until the next acquire, which waits for this release.
  end_hold_then(engine, [owner = std::move(owner), h = std::move(h), in_place](error_code) mutable {
    auto& token = owner->hold.token();
    send_release(std::move(owner), token, std::move(h), in_place);
  });
}

}  // namespace

// From the handle's thread: on the lock's executor, in place when this
// thread runs it. Dispatched once, never again from inside the dispatch (a
// strand cannot say it is running here: asking again would recurse).
void start_extend(std::shared_ptr<lock_engine> owner, milliseconds ttl, handler0 handler) {
  auto& executor = owner->executor;
  dlock::detail::dispatch_here(executor, [owner = std::move(owner), ttl, h = std::move(handler)]() mutable {
    extend_here(std::move(owner), ttl, std::move(h));
  });
}

void start_release(std::shared_ptr<lock_engine> owner, handler0 handler, bool in_place) {
  auto& executor = owner->executor;
  dlock::detail::dispatch_here(executor, [owner = std::move(owner), h = std::move(handler), in_place]() mutable {
    release_here(std::move(owner), std::move(h), in_place);
  });
}

// Marked at once, from any thread: an acquire decided before the rest runs
// gives up as a cancelled one (its handler is posted, never run inside the
// destructor). On the lock's own thread the delete is queued at once, ahead
// of whatever the next lock sends on the same connection.
void abandon(std::shared_ptr<lock_engine> owner) {
  owner->abandoned = true;
  auto& executor = owner->executor;
  dlock::detail::dispatch_here(executor, [owner = std::move(owner)] {
    cancel_acquire(*owner);  // an acquire in progress ends: nobody could release what it took
    if (owner->hold.state() == hold::phase::lost) return owner->hold.end();  // deleted at the loss
    if (!owner->hold.held()) return;
    end_hold_then(*owner, [owner](error_code) { owner->release_in_background(owner->hold.token()); });
  });
}

}  // namespace dlock::redis::detail
