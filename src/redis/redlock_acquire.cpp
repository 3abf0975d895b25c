// The Redlock algorithm (redis.io/docs/manual/patterns/distributed-locks),
// read top to bottom:
//
//  1. Take a fresh random token and the time `start`.
//  2. Send `SET key token NX PX ttl` to every master at once, each with a
//     short per-master timeout (redlock_fanout.cpp).
//  3. The attempt is won when a majority (N/2 + 1) said yes while validity
//     is left: ttl - (now - start) - drift (engine/round.hpp, timing.hpp).
//     It is lost the moment a majority is out of reach.
//  4. With fencing, each master's SET is a script that also counts the hold
//     on the key's counter; the round waits until the counters it saw cover
//     a majority, takes the largest as the token, and writes it back to the
//     masters behind it until a majority holds it (engine/round.hpp has the
//     argument).
//  5. Won: the lock is held for that validity (engine/hold.hpp).
//     Lost: delete the token on every master (a SET may have landed without
//     its yes reaching us), pause a random delay, try again, until the
//     retries or the wait run out (engine/acquire_machine.hpp decides).
//
// No attempt is sent while a delete of an earlier one is unanswered, and
// every attempt has its own token, so a delete can only ever remove the keys
// of the attempt it belongs to.
#include "redlock_fanout.hpp"

#include "detail/op_base.hpp"
#include "redis/engine/acquire_machine.hpp"
#include "redis/engine/replies.hpp"
#include "redis/token.hpp"

#include <dlock/log.hpp>
#include <dlock/limits.hpp>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <cstdint>
#include <limits>

namespace dlock::redis::detail {
namespace {

using std::chrono::milliseconds;
using handler0 = asio::any_completion_handler<void(error_code)>;
using kind = acquire_action::kind;

class lock_op;

/// Step 4's write-back: max(counter, token) on the masters behind the token.
/// It reports as soon as `needed` of them confirmed (or that they cannot);
/// without a report function it only raises them, in the background.
class fencing_write_back final : public fanout {
 public:
  using report_function = std::function<void(error_code)>;
  fencing_write_back(std::shared_ptr<redlock_impl> owner, std::int64_t token, std::size_t needed,
                     report_function report)
      : fanout(std::move(owner)), token_(token), needed_(needed), report_(std::move(report)) {}

  void send_to(std::size_t index) {
    if (!has_command()) {
      auto text = std::to_string(token_);
      set_command(fencing_write_back_script(), {owner_->counter_key}, {text});
    }
    ++asked_;
    send(index);
  }
  void start() {
    if (asked_ < needed_) return finish(dlock::error::no_quorum);
    arm_deadline();
  }

 private:
  void on_answer(std::size_t, error_code ec, const reply& answer) override {
    auto counter = ec ? std::nullopt : integer_value(answer);
    if (counter && *counter >= token_) ++confirmed_;
    else ++failed_;
    if (confirmed_ >= needed_) finish({});
    else if (asked_ - failed_ < needed_) finish(dlock::error::no_quorum);
  }
  void on_deadline() override { finish(dlock::error::no_quorum); }
  void finish(error_code ec) {
    if (auto report = std::exchange(report_, nullptr)) report(ec);
  }

  std::int64_t token_;
  std::size_t needed_;
  report_function report_;
  std::size_t asked_ = 0, confirmed_ = 0, failed_ = 0;
};

/// Step 2 and 3: one attempt, `SET key token NX PX ttl` on every master,
/// decided by a round.
class acquire_attempt final : public fanout {
 public:
  acquire_attempt(std::shared_ptr<redlock_impl> owner, std::shared_ptr<lock_op> op)
      : fanout(std::move(owner)),
        report_(*owner_, round_kind::acquire),
        round_(owner_->masters.size(), owner_->options.ttl, owner_->hold_drift(), recent_now(),
               owner_->options.fencing),
        op_(std::move(op)),
        token_(make_token_text()) {}

  void start() {
    set_attempt_command();
    send_to_all();
    arm_deadline();
  }

  /// The acquire was cancelled: forget it, abandon what is still pending.
  void abandon() {
    op_.reset();
    abandon_pending();
  }

  const redlock_round& round() const noexcept { return round_; }
  /// Won: the round, and with fencing the write-back, succeeded.
  bool won() const noexcept { return round_.state() == round_state::acquired && !write_back_failure_; }
  error_code failure() const noexcept { return write_back_failure_ ? write_back_failure_ : round_.failure(); }
  std::string_view token() const noexcept { return token_.view(); }

 private:
  void on_answer(std::size_t index, error_code ec, const reply& answer) override;
  void on_deadline() override {
    bool was_decided = round_.decided();
    round_.time_out_pending(redlock_clock::now());
    report_.time_out_pending(round_.start());
    if (!was_decided) decided();
  }
  void on_all_answered() override { report_.settled(*owner_); }
  void decided();
  void write_back();
  void written_back(error_code ec);
  void set_attempt_command();

  // What every answer reads first (the report is a null pointer unless observed).
  round_report report_;
  redlock_round round_;
  std::shared_ptr<lock_op> op_;
  token_text token_;  // fresh for every attempt
  error_code write_back_failure_;
  boost::container::small_vector<bool, 7> resent_;  // after NOSCRIPT, once per master
};

/// One acquire: the acquire machine's actions, until it holds the lock, gives
/// up, or is cancelled.
class lock_op : public std::enable_shared_from_this<lock_op> {
 public:
  lock_op(std::shared_ptr<redlock_impl> owner, handler0 handler, bool retry, std::optional<milliseconds> wait,
          bool in_place)
      : owner_(std::move(owner)),
        op_(std::move(handler)),
        machine_(acquire_policy{retry, true}, schedule_for(owner_->options, wait)),
        wait_(wait),
        in_place_(in_place),
        pause_(owner_->executor) {}

  // Called on the initiating thread: a cancellation is forwarded to the executor.
  void bind_cancellation() {
    op_.hook_cancellation(owner_->executor, [weak = weak_from_this()](asio::cancellation_type) {
      if (auto self = weak.lock()) self->cancel();
    });
  }

  void start() {
    started_ = owner_->observed.started(machine_.policy().retry);
    if (auto refused = refusal()) return complete(refused, in_initiation);
    owner_->acquiring = true;
    owner_->released = false;
    owner_->acquire_in_progress = weak_from_this();
    act(machine_.start(owner_->cleanups_in_flight > 0));
  }

  /// Step 4: the round of the current attempt was decided.
  void on_decided(acquire_attempt& attempt) {
    if (op_.done() || &attempt != current_.get()) return;
    const auto& round = attempt.round();
    bool won = attempt.won();
    if (!won && dlock::detail::log_enabled(log_level::debug))
      dlock::detail::log(log_level::debug, "redlock " + owner_->key + ": attempt failed (" +
                                               attempt.failure().message() + "): " + owner_->last_outcomes());
    // A lost attempt may have set keys whose yes never came back: delete them.
    // Only a retry's pause needs the time and a random draw.
    double random = won ? 0.0 : owner_->random_unit();
    auto now = won ? redlock_clock::time_point() : redlock_clock::now();
    // The round counted drift into its validity; the stall margin is the hold's.
    auto left = won ? round.validity_at_decision() - owner_->hold.stall_margin() : milliseconds::zero();
    auto action = machine_.attempt_decided(won ? error_code() : attempt.failure(), !won, left, now, random);
    if (action.what == kind::complete && !action.result)
      owner_->begin_hold(attempt.token(), round.start(), round.fencing_token());
    act(action);
  }

  // The deletes run on handlers of their own: the caller's cancellation never reaches them.
  void cancel() {
    if (op_.done()) return;
    if (current_) current_->abandon();
    owner_->after_cleanups = nullptr;
    pause_.cancel();
    act(machine_.cancel());
  }

 private:
  error_code refusal() const {
    if (!owner_->invalid_reason.empty() || (wait_ && (*wait_ <= milliseconds::zero() || *wait_ > dlock::max_duration)))
      return dlock::error::invalid_argument;
    if (owner_->every_master_closed()) return dlock::error::closed;
    if (owner_->hold.held()) return dlock::error::already_held;
    if (owner_->acquiring || owner_->releasing) return dlock::error::in_progress;
    return {};
  }

  void act(acquire_action action) {
    if (action.what == kind::none) return;
    auto attempt = std::move(current_);  // decided or abandoned: the next one is fresh
    if (action.delete_attempt && attempt) owner_->release_in_background(attempt->token());  // every master
    switch (action.what) {
      case kind::wait_for_cleanups:
        owner_->after_cleanups = [self = shared_from_this()] { self->act(self->machine_.cleanups_settled()); };
        return;
      case kind::send_attempt:
        owner_->resend_unsettled_cleanups();  // ahead of this attempt's SETs, on the same connections
        ++attempts_;
        current_ = std::make_shared<acquire_attempt>(owner_, shared_from_this());
        return current_->start();
      case kind::pause:
        pause_.expires_after(action.pause);
        return pause_.async_wait([self = shared_from_this()](error_code ec) {
          if (!ec) self->act(self->machine_.pause_over(self->owner_->cleanups_in_flight > 0));
        });
      case kind::complete:
        owner_->acquiring = false;
        return complete(action.result);
      case kind::none: return;
    }
  }

  static constexpr bool in_initiation = true;
  void complete(error_code ec, bool initiating = false) {
    using dlock::detail::completion;
    auto how = initiating ? completion::post : in_place_ ? completion::in_place : completion::dispatch;
    owner_->observed.finished(started_, ec, attempts_, owner_->hold.fencing_token());
    op_.complete(how, owner_->executor, ec);
  }

  // acquire_for(limit): retry until `limit`, whatever the options say.
  // The clock is read only for a deadline. Built before refusal() looks at
  // the options: a wait beyond max_duration (refused there) is not added to
  // the clock, where it would overflow.
  static retry_schedule schedule_for(const redlock_options& o, std::optional<milliseconds> wait) {
    auto addable = [](milliseconds d) { return d > milliseconds::zero() && d <= dlock::max_duration; };
    if (wait) {
      std::optional<redlock_clock::time_point> until;
      if (addable(*wait)) until = redlock_clock::now() + *wait;
      return retry_schedule(-1, o.retry_delay, o.retry_jitter, until);
    }
    std::optional<redlock_clock::time_point> deadline;
    if (addable(o.wait_limit)) deadline = redlock_clock::now() + o.wait_limit;
    return retry_schedule(o.retry_count, o.retry_delay, o.retry_jitter, deadline);
  }

  std::shared_ptr<redlock_impl> owner_;
  dlock::detail::op_base<void(error_code)> op_;
  acquire_machine machine_;
  std::optional<milliseconds> wait_;
  bool in_place_;  // the handler runs on the redlock's executor
  asio::steady_timer pause_;
  std::shared_ptr<acquire_attempt> current_;
  redlock_clock::time_point started_{};  // when observed
  std::uint32_t attempts_ = 0;
};

struct classified {
  master_outcome outcome;
  std::int64_t counter = redlock_round::no_counter;
};

classified classify(error_code ec, const reply& answer, bool fencing) {
  if (ec) return {master_outcome::failed};
  if (fencing) {
    auto fenced = interpret_redlock_fenced_set(answer);
    if (fenced.outcome == set_outcome::unexpected) return {master_outcome::failed};
    auto outcome = fenced.outcome == set_outcome::acquired ? master_outcome::ok : master_outcome::taken;
    // A holder's counter at INT64_MAX leaves no larger token to take: such
    // a master cannot vouch for ours (and counter + 1 would overflow).
    if (outcome == master_outcome::taken && fenced.counter == std::numeric_limits<std::int64_t>::max())
      return {master_outcome::failed};
    return {outcome, fenced.counter};
  }
  if (answer.is_ok()) return {master_outcome::ok};
  if (answer.is_nil()) return {master_outcome::taken};
  return {master_outcome::failed};
}

void acquire_attempt::set_attempt_command() {
  const auto& o = owner_->options;
  auto ttl = std::to_string(o.ttl.count());
  if (o.fencing) return set_command(redlock_fenced_acquire_script(), {owner_->key, owner_->counter_key}, {token(), ttl});
  set_command({"SET", owner_->key, token(), "NX", "PX", ttl});
}

void acquire_attempt::on_answer(std::size_t index, error_code ec, const reply& answer) {
  bool not_run = ec == redis::error::script_not_run || ec == redis::error::no_script;
  if (not_run && !deadline_passed()) {  // the script did not run: send it again, once
    resent_.resize(owner_->masters.size(), false);
    if (!std::exchange(resent_[index], true)) return send(index);
  }
  bool was_decided = round_.decided();
  auto answered = classify(ec, answer, owner_->options.fencing);
  report_.answered(index, answered.outcome, ec, round_.start());
  // The time of a deciding answer must not be early: validity is measured
  // to it. A decided round takes no more times (the late ones are free).
  round_.record(index, answered.outcome, was_decided ? redlock_clock::time_point() : redlock_clock::now(),
                answered.counter);
  if (!was_decided && round_.decided()) return decided();
  // A counter behind the token of a won round, answered after the decision: raise it too.
  if (was_decided && round_.state() == round_state::acquired && round_.behind(index)) {
    auto raise = std::make_shared<fencing_write_back>(owner_, round_.fencing_token(), 0, nullptr);
    raise->send_to(index);
    raise->start();
  }
  // A yes after the round failed: release it again (this attempt's token,
  // which no other attempt uses).
  if (round_.needs_late_release(index)) owner_->release_in_background(token(), index);
}

void acquire_attempt::decided() {
  owner_->note_outcomes(round_);
  report_.decided(round_.failure(), round_.start());
  if (round_.state() == round_state::acquired && owner_->options.fencing) return write_back();
  if (op_) op_->on_decided(*this);
}

// Step 4: the masters behind the token are raised to it. The hold begins once
// a majority holds it; the ones beyond that are raised in the background.
void acquire_attempt::write_back() {
  auto at_token = round_.at_token(), quorum = round_.quorum();
  bool wait = at_token < quorum;
  fencing_write_back::report_function report;
  if (wait) {
    auto self = std::static_pointer_cast<acquire_attempt>(shared_from_this());
    report = [self](error_code ec) { self->written_back(ec); };
  }
  auto raise = std::make_shared<fencing_write_back>(owner_, round_.fencing_token(), wait ? quorum - at_token : 0,
                                                    std::move(report));
  for (std::size_t i = 0; i < owner_->masters.size(); ++i)
    if (round_.behind(i)) raise->send_to(i);
  raise->start();
  if (!wait && op_) op_->on_decided(*this);
}

void acquire_attempt::written_back(error_code ec) {
  if (!ec && round_.validity(redlock_clock::now()) <= milliseconds::zero()) ec = dlock::error::expired;
  write_back_failure_ = ec;
  if (op_) op_->on_decided(*this);
}

}  // namespace

void start_acquire(std::shared_ptr<redlock_impl> owner, handler0 handler, bool retry,
                   std::optional<milliseconds> wait, bool in_place) {
  auto op = std::make_shared<lock_op>(owner, std::move(handler), retry, wait, in_place);
  op->bind_cancellation();
  dlock::detail::dispatch_here(owner->executor, [op = std::move(op)] { op->start(); });
}

void cancel_acquire(redlock_impl& owner) {
  if (auto op = owner.acquire_in_progress.lock()) std::static_pointer_cast<lock_op>(op)->cancel();
}

}  // namespace dlock::redis::detail
