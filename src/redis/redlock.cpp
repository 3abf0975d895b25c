// The Asio shell of the Redlock: attempts, retries, extension, release.
// The decisions are made by redlock_round (detail/redlock_round.hpp).
#include <dlock/redis/redlock.hpp>

#include "redlock_fanout.hpp"

#include <dlock/log.hpp>
#include <dlock/redis/detail/token.hpp>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

#include <optional>

namespace dlock::redis {
namespace detail {
namespace {

using std::chrono::milliseconds;
using handler0 = asio::any_completion_handler<void(error_code)>;

class lock_op;

/// One attempt: `SET key token NX PX ttl` on every master (any Redis since
/// 2.6.12), with a token of its own: the cleanup of an earlier attempt can
/// only ever delete that attempt's keys.
class acquire_attempt final : public fanout {
 public:
  acquire_attempt(std::shared_ptr<redlock_impl> owner, std::shared_ptr<lock_op> op)
      : fanout(std::move(owner)),
        round_(owner_->masters.size(), owner_->options.ttl, owner_->options.drift_factor,
               redlock_clock::now()),
        op_(std::move(op)),
        token_(make_token()) {}

  void start() {
    command set{"SET", owner_->key, token_, "NX", "PX"};
    set.arg(owner_->options.ttl.count());
    auto wire = encode(std::move(set));
    for (std::size_t i = 0; i < owner_->masters.size(); ++i) send(i, wire);
    arm_deadline();
  }

  /// The lock() was cancelled: forget it, abandon what is still pending.
  void abandon() {
    op_.reset();
    abandon_pending();
  }

  const redlock_round& round() const noexcept { return round_; }
  const std::string& token() const noexcept { return token_; }

 private:
  void on_answer(std::size_t index, error_code ec, reply answer) override;
  void on_deadline() override {
    bool was_decided = round_.decided();
    round_.time_out_pending(redlock_clock::now());
    if (!was_decided) decided();
  }
  void decided();
  master_outcome classify(std::size_t index, error_code ec, const reply& answer);

  redlock_round round_;
  std::shared_ptr<lock_op> op_;
  std::string token_;  // fresh for every attempt
};

/// One `lock()` or `try_lock()`: attempts, cleanups and pauses until it holds
/// the lock, gives up, or is cancelled.
class lock_op : public std::enable_shared_from_this<lock_op> {
 public:
  lock_op(std::shared_ptr<redlock_impl> owner, handler0 handler, bool retry, std::optional<milliseconds> wait,
          bool in_place)
      : owner_(std::move(owner)),
        handler_(std::move(handler)),
        retry_(retry_options(owner_->options, wait), redlock_clock::now()),
        wait_(wait),
        retry_enabled_(retry),
        in_place_(in_place),
        pause_(owner_->executor) {}

  // Called on the initiating thread: a cancellation is forwarded to the executor.
  void bind_cancellation() {
    slot_ = asio::get_associated_cancellation_slot(handler_);
    if (!slot_.is_connected()) return;
    std::weak_ptr<lock_op> weak = weak_from_this();
    auto executor = owner_->executor;
    slot_.assign([weak, executor](asio::cancellation_type_t type) {
      if (!(type & (asio::cancellation_type::terminal | asio::cancellation_type::partial))) return;
      asio::post(executor, [weak] {
        if (auto self = weak.lock()) self->cancel();
      });
    });
  }

  void start() {
    if (!owner_->invalid_reason.empty() || (wait_ && *wait_ <= milliseconds::zero()))
      return complete(dlock::error::invalid_argument, in_initiation);
    if (owner_->every_master_closed()) return complete(dlock::error::closed, in_initiation);
    if (owner_->state == hold_state::held) return complete(dlock::error::already_held, in_initiation);
    if (owner_->state == hold_state::acquiring || owner_->releasing)
      return complete(dlock::error::in_progress, in_initiation);
    owner_->state = hold_state::acquiring;
    owner_->released = false;
    owner_->acquire_op = weak_from_this();
    next_attempt();
  }

  void on_decided(acquire_attempt& attempt) {
    if (!handler_ || &attempt != current_.get()) return;
    auto finished = std::move(current_);
    const auto& round = attempt.round();
    if (round.state() == round_state::acquired) {
      owner_->token = attempt.token();
      owner_->begin_hold(round.start(), owner_->options.ttl);
      return complete(error_code{});
    }
    owner_->release_in_background(attempt.token());  // every master: a SET may have landed unseen
    auto failure = round.failure();
    if (dlock::detail::log_enabled(log_level::debug))
      dlock::detail::log(log_level::debug, "redlock " + owner_->key + ": attempt failed (" + failure.message() +
                                "): " + owner_->last_outcomes);
    auto pause = retry_enabled_ ? retry_.next(redlock_clock::now(), owner_->random_unit())
                                : std::optional<milliseconds>{};
    if (!pause) {
      owner_->state = hold_state::idle;
      // The wait ran out while others held the lock: timed_out, as on every
      // dlock lock. No quorum (or no validity left) is a fact of its own.
      if (retry_enabled_ && failure == dlock::error::taken) failure = dlock::error::timed_out;
      return complete(failure);
    }
    pause_.expires_after(*pause);
    pause_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->next_attempt();
    });
  }

 private:
  // The next SET waits for every cleanup in flight to be answered or to time
  // out (see redlock_impl::cleanups_in_flight), so a cleanup that runs late
  // (after a NOSCRIPT round trip, say) never meets the attempt's keys.
  void next_attempt() {
    if (!handler_) return;
    if (owner_->cleanups_in_flight == 0) return attempt();
    owner_->after_cleanups = [self = shared_from_this()] { self->next_attempt(); };
  }
  void attempt() {
    owner_->resend_unsettled_cleanups();  // ahead of this attempt's SETs, on the same connections
    current_ = std::make_shared<acquire_attempt>(owner_, shared_from_this());
    current_->start();
  }

  // Cleanup runs on handlers of its own: the caller's cancellation never reaches it.
 public:
  void cancel() {
    if (!handler_) return;
    if (current_) {
      current_->abandon();
      owner_->release_in_background(current_->token());
      current_.reset();
    }
    owner_->after_cleanups = nullptr;
    pause_.cancel();
    owner_->state = hold_state::idle;
    complete(asio::error::operation_aborted);
  }

 private:

  static constexpr bool in_initiation = true;
  void complete(error_code ec, bool initiating = false) {
    if (slot_.is_connected()) slot_.clear();
    if (initiating) return post_completion(owner_->executor, std::move(handler_), ec);
    dlock::detail::complete_from_handler(in_place_, owner_->executor, std::move(handler_), ec);
  }

  std::shared_ptr<redlock_impl> owner_;
  // acquire_for(limit): retry until `limit`, whatever the options say.
  static redlock_options retry_options(redlock_options options, std::optional<milliseconds> wait) {
    if (wait) {
      options.retry_count = -1;
      options.wait_limit = *wait;
    }
    return options;
  }

  handler0 handler_;
  asio::cancellation_slot slot_;
  redlock_retry retry_;
  std::optional<milliseconds> wait_;
  bool retry_enabled_;
  bool in_place_;  // the handler runs on the redlock's executor
  asio::steady_timer pause_;
  std::shared_ptr<acquire_attempt> current_;
};

master_outcome acquire_attempt::classify(std::size_t, error_code ec, const reply& answer) {
  if (ec) return master_outcome::failed;
  if (answer.is_ok()) return master_outcome::ok;
  if (answer.is_nil()) return master_outcome::taken;
  return master_outcome::failed;
}

void acquire_attempt::on_answer(std::size_t index, error_code ec, reply answer) {
  auto outcome = classify(index, ec, answer);
  bool was_decided = round_.decided();
  round_.record(index, outcome, redlock_clock::now());
  if (!was_decided && round_.decided()) return decided();
  // A yes after the round failed: release it again (this attempt's token,
  // which no other attempt uses).
  if (round_.needs_late_release(index)) owner_->release_in_background(token_, index);
}

void acquire_attempt::decided() {
  owner_->note_outcomes(round_);
  if (op_) op_->on_decided(*this);
}

// ------------------------------------------------------------------ extend_op

// Why a hold cannot be extended: lost (as redis::lock says), or not held.
error_code not_extendable(const redlock_impl& owner) {
  return owner.state == hold_state::lost ? dlock::error::lost : dlock::error::not_held;
}

/// Compare-and-PEXPIRE on every master, decided at the majority.
class extend_op final : public fanout {
 public:
  extend_op(std::shared_ptr<redlock_impl> owner, milliseconds ttl, handler0 handler)
      : fanout(std::move(owner)),
        round_(owner_->masters.size(), ttl, owner_->options.drift_factor, redlock_clock::now()),
        ttl_(ttl),
        hold_id_(owner_->hold_id),
        handler_(std::move(handler)) {}

  void start() {
    auto ttl = std::to_string(ttl_.count());
    auto tail = connection::eval_tail({std::string_view(owner_->key)},
                                      {std::string_view(owner_->token), std::string_view(ttl)});
    auto extend = encode_eval(extend_script(), tail);
    for (std::size_t i = 0; i < owner_->masters.size(); ++i) send(i, extend);
    arm_deadline();
  }

 private:
  void on_answer(std::size_t index, error_code ec, reply answer) override {
    auto outcome = ec ? master_outcome::failed
                 : (answer.is_integer() && answer.integer() == 1) ? master_outcome::ok
                                                                  : master_outcome::taken;
    bool was_decided = round_.decided();
    round_.record(index, outcome, redlock_clock::now());
    if (!was_decided && round_.decided()) decided();
  }
  void on_deadline() override {
    bool was_decided = round_.decided();
    round_.time_out_pending(redlock_clock::now());
    if (!was_decided) decided();
  }
  void decided() {
    if (owner_->hold_id != hold_id_ || owner_->state != hold_state::held)
      return complete(not_extendable(*owner_));  // released or lost meanwhile
    owner_->note_outcomes(round_);
    if (round_.state() == round_state::acquired) {
      owner_->renew_hold(round_.start(), ttl_);
      return complete(error_code{});
    }
    owner_->lose(make_error_code(dlock::error::lost));
    complete(dlock::error::lost);
  }
  void complete(error_code ec) { dispatch_completion(owner_->executor, std::move(handler_), ec); }

  redlock_round round_;
  milliseconds ttl_;
  std::uint64_t hold_id_;
  handler0 handler_;
};

}  // namespace

void start_extend(std::shared_ptr<redlock_impl> owner, milliseconds ttl, handler0 handler) {
  if (owner->state != hold_state::held)
    return post_completion(owner->executor, std::move(handler), not_extendable(*owner));
  if (ttl <= milliseconds::zero() || owner->options.master_timeout >= ttl)
    return post_completion(owner->executor, std::move(handler),
                          make_error_code(dlock::error::invalid_argument));
  auto op = std::make_shared<extend_op>(std::move(owner), ttl, std::move(handler));
  op->start();
}

}  // namespace detail

// --------------------------------------------------------------------- redlock

namespace {

// Why the redlock cannot work with these arguments ("" when it can).
std::string invalid_arguments(const std::vector<std::shared_ptr<connection>>& masters, std::string_view key,
                              const redlock_options& options) {
  for (const auto& master : masters)
    if (!master) return "redlock: a master is null";
  // A master given twice would count twice toward the majority.
  for (std::size_t i = 0; i < masters.size(); ++i)
    for (std::size_t j = 0; j < i; ++j) {
      const auto &a = masters[i]->get_options(), &b = masters[j]->get_options();
      if (masters[i] == masters[j] || detail::same_master(a.host, a.port, b.host, b.port))
        return "redlock: master " + a.host + ":" + std::to_string(a.port) + " is given twice";
    }
  return std::string(detail::redlock_invalid_reason(options, masters.size(), key));
}

}  // namespace

// Bad arguments never throw: they are told by the first acquire, as on every
// dlock lock (the impl then gets no masters, so nothing can reach a null one).
redlock::redlock(asio::any_io_executor executor, std::vector<std::shared_ptr<connection>> masters,
                 std::string key, redlock_options options) {
  auto reason = invalid_arguments(masters, key, options);
  if (!reason.empty()) {
    masters.clear();
    if (dlock::detail::log_enabled(log_level::error)) dlock::detail::log(log_level::error, reason);
  }
  impl_ = std::make_shared<detail::redlock_impl>(std::move(executor), std::move(masters), std::move(key),
                                                 options);
  impl_->invalid_reason = std::move(reason);
}

redlock::~redlock() {
  if (!impl_) return;  // moved from
  asio::post(impl_->executor, [impl = impl_] {
    // An acquire in progress ends (operation_aborted): nobody could release what it took.
    if (auto op = impl->acquire_op.lock()) std::static_pointer_cast<detail::lock_op>(op)->cancel();
    if (impl->state == detail::hold_state::held || impl->state == detail::hold_state::lost)
      impl->end_hold([impl](error_code) { impl->release_in_background(); });
  });
}

redlock::executor_type redlock::get_executor() const noexcept { return impl_->executor; }

void redlock::start_lock(handler0 handler, bool retry, std::optional<std::chrono::milliseconds> wait,
                         bool in_place) {
  auto op = std::make_shared<detail::lock_op>(impl_, std::move(handler), retry, wait, in_place);
  op->bind_cancellation();
  asio::dispatch(impl_->executor, [op] { op->start(); });
}

void redlock::start_unlock(handler0 handler, bool in_place) {
  asio::dispatch(impl_->executor, [impl = impl_, h = std::move(handler), in_place]() mutable {
    if (impl->state == detail::hold_state::lost) {
      // lose() released the keys in the background already: tell the reason.
      auto reason = impl->loss.reason();
      impl->end_hold();
      impl->released = true;
      impl->released_masters = 0;
      return detail::post_completion(impl->executor, std::move(h), reason);
    }
    if (impl->state != detail::hold_state::held)
      return detail::post_completion(impl->executor, std::move(h),
                                    impl->released ? error_code() : make_error_code(dlock::error::not_held));
    impl->released = true;
    if (impl->every_master_closed()) {  // nothing can be sent: the keys go with their TTL
      impl->end_hold([](error_code) {});  // stops auto-extension too
      impl->released_masters = 0;
      return detail::post_completion(impl->executor, std::move(h), make_error_code(dlock::error::closed));
    }
    impl->releasing = true;  // no acquire until it completes (see release_fanout::complete)
    if (!impl->options.auto_extend) {  // nothing to wait for
      impl->end_hold();
      auto op = std::make_shared<detail::release_fanout>(impl, impl->token, std::move(h), in_place);
      op->ends_release();
      return op->start();
    }
    // No extension may land after the release: wait for one in flight. The
    // token is this hold's, taken now.
    impl->end_hold(asio::any_completion_handler<void(error_code)>(
        [impl, token = impl->token, h = std::move(h), in_place](error_code) mutable {
          auto op = std::make_shared<detail::release_fanout>(impl, std::move(token), std::move(h), in_place);
          op->ends_release();
          op->start();
        }));
  });
}

void redlock::start_extend(std::chrono::milliseconds ttl, handler0 handler) {
  asio::dispatch(impl_->executor, [impl = impl_, ttl, h = std::move(handler)]() mutable {
    detail::start_extend(impl, ttl, std::move(h));
  });
}

bool redlock::held() const noexcept { return impl_->state == detail::hold_state::held; }

std::chrono::milliseconds redlock::validity() const noexcept {
  return impl_->validity(detail::redlock_clock::now());
}

lock_loss& redlock::loss() noexcept { return impl_->loss; }
std::string redlock::last_outcomes() const { return impl_->last_outcomes; }
std::string redlock::token() const { return impl_->token; }
std::size_t redlock::released_masters() const noexcept { return impl_->released_masters; }
const std::string& redlock::invalid_reason() const noexcept { return impl_->invalid_reason; }
const std::string& redlock::key() const noexcept { return impl_->key; }
std::size_t redlock::masters() const noexcept { return impl_->masters.size(); }

}  // namespace dlock::redis
