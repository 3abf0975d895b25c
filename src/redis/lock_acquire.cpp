// The acquire of a redis::lock or a redis::semaphore's lease: the Asio shell
// of the acquire machine (engine/acquire_machine.hpp) over one connection. An
// attempt is one `SET key token NX PX ttl` (or the fenced or semaphore
// script, hold_commands.hpp); a failed one is not retried (one server: its
// error is the answer), a taken one is, until the wait runs out.
#include "lock_state.hpp"

#include "detail/completion.hpp"
#include "redis/engine/replies.hpp"

namespace dlock::redis::detail {
namespace {

using kind = acquire_action::kind;

void act(acquire_op&& op, acquire_action action);

double unit_random(lock_state& s) { return std::uniform_real_distribution<double>(0.0, 1.0)(s.random); }

void send_attempt(acquire_op&& op) {
  auto s = op.s;
  op.token = make_token();
  op.sent = steady_clock::now();
  ++op.attempts;
  auto wire = s->commands.attempt(op.token, s->opts.ttl);  // before `op` is moved
  connection_access::submit(*s->conn, std::move(wire), std::move(op));
}

// Nothing is sent while waiting: a cancellation (cancel_acquire) ends the wait at once.
void wait_for_cleanups(acquire_op&& op) {
  auto s = op.s;
  s->waiting.emplace(std::move(op));
}

// On the lock's executor, for the caller's slot. Recorded first, then passed
// to the step under way; an acquire that has ended (or not begun) is left alone.
void cancel_acquire(const std::shared_ptr<lock_state>& s, std::uint64_t number, asio::cancellation_type type) {
  if (!s->acquiring || s->current_acquire != number || s->cancel_requested) return;
  s->cancel_requested = true;
  if (s->waiting) return stop_waiting(s);
  s->step_cancel.emit(type);
}

// From a reply, a timer or a cleanup's answer (never inside an initiating
// function): the caller may resume in place.
void complete(acquire_op&& op, error_code result) {
  op.s->acquiring = false;
  op.s->observed.finished(op.started, result, op.attempts, op.s->hold.fencing_token());
  using dlock::detail::completion;
  op.op.complete(op.in_place ? completion::in_place : completion::dispatch, op.s->executor, result);
}

// By reference all the way to the one place that keeps the op (the
// connection, the timer, the waiting slot): an op is moved once per step.
void act(acquire_op&& op, acquire_action action) {
  if (action.delete_attempt) start_cleanup(op.s, op.token);
  switch (action.what) {
    case kind::send_attempt: return send_attempt(std::move(op));
    case kind::wait_for_cleanups: return wait_for_cleanups(std::move(op));
    case kind::pause: {
      auto& pause = op.s->retry_pause;
      pause.expires_after(action.pause);
      return pause.async_wait(std::move(op));  // bound to the caller's slot: cancellable
    }
    case kind::complete: return complete(std::move(op), action.result);
    case kind::none: return complete(std::move(op), asio::error::fault);  // not sent by this shell
  }
}

void begin_hold(const std::shared_ptr<lock_state>& s, std::string token, steady_time sent, std::int64_t fencing_token);

}  // namespace

acquire_op::cancellation_slot_type acquire_op::get_cancellation_slot() const noexcept {
  return s->cancellable ? s->step_cancel.slot() : cancellation_slot_type();
}

// An acquire given up: its caller cancelled, or the lock is gone.
static bool given_up(const lock_state& s) noexcept { return s.destroyed || s.cancel_requested; }

void acquire_op::operator()(error_code ec, reply answer) {
  // A fenced attempt's script was not run (the server's script cache was
  // flushed): nothing was set, send it again.
  if (not_run(ec) && !given_up(*s) && ++sends < max_cleanup_sends) return send_attempt(std::move(*this));
  std::int64_t fencing_token = 0;
  auto failure = s->commands.attempt_failure(ec, answer, fencing_token);
  bool may_have_landed = s->commands.attempt_may_have_landed(ec, failure);
  if (given_up(*s)) {  // nobody would release what it took
    auto action = machine.cancel();
    action.delete_attempt = may_have_landed;
    return act(std::move(*this), action);
  }
  auto now = steady_clock::now();
  auto left = failure ? std::chrono::milliseconds::zero() : s->hold.validity_if_begun(sent, s->opts.ttl, now);
  double random = failure ? unit_random(*s) : 0.0;  // only a retry's pause needs it
  auto action = machine.attempt_decided(failure, may_have_landed, left, now, random);
  if (action.what == kind::complete && !action.result) begin_hold(s, token, sent, fencing_token);
  act(std::move(*this), action);
}

void acquire_op::operator()(error_code ec) {
  if (ec || given_up(*s)) return act(std::move(*this), machine.cancel());
  auto action = machine.pause_over(s->cleanups_in_flight > 0);
  act(std::move(*this), action);
}

void stop_waiting(const std::shared_ptr<lock_state>& s) {
  if (!s->waiting) return;
  auto op = std::move(*s->waiting);
  s->waiting.reset();
  op.machine.cancel();
  s->acquiring = false;
  s->observed.finished(op.started, asio::error::operation_aborted, op.attempts, 0);
  op.op.complete(dlock::detail::completion::post, s->executor, asio::error::operation_aborted);
}

void resume_waiting(const std::shared_ptr<lock_state>& s) {
  if (!s->waiting) return;
  auto op = std::move(*s->waiting);
  s->waiting.reset();
  auto action = op.machine.cleanups_settled();
  act(std::move(op), action);
}

namespace {

// Without auto-extension the hold's validity watch tells the holder when it
// runs out; with it, one extension every ttl * extend_fraction.
asio::awaitable<error_code> extend_step(std::weak_ptr<lock_state> weak);

void begin_hold(const std::shared_ptr<lock_state>& s, std::string token, steady_time sent,
                std::int64_t fencing_token) {
  s->hold.begin(std::move(token), sent, s->opts.ttl, fencing_token);
  if (!s->opts.auto_extend) return;
  auto_extend_settings settings{s->opts.ttl, s->opts.extend_fraction, s->opts.max_hold};
  std::weak_ptr<lock_state> weak = s;
  s->hold.extend_automatically(settings, [weak] { return extend_step(weak); });
}

asio::awaitable<error_code> extend_step(std::weak_ptr<lock_state> weak) {
  auto s = weak.lock();
  if (!s) co_return dlock::error::closed;
  auto extending = extend_held(s, s->opts.ttl);
  co_return co_await std::move(extending);
}

// Options the lock cannot work with (UB, a tight loop, no validity: a ttl
// the drift allowance eats whole could never be held).
error_code validate_options(const hold_commands& what, const lock_options& o) {
  if (auto ec = what.invalid(o.ttl)) return ec;
  // A lease has no fencing token to give.
  if (o.fencing && what.what == hold_commands::kind::semaphore) return dlock::error::invalid_argument;
  // Beyond max_duration a deadline (now + duration, in nanoseconds) overflows.
  auto out_of_range = [](std::chrono::milliseconds d) { return d.count() < 0 || d > dlock::max_duration; };
  bool bad = out_of_range(o.wait) || out_of_range(o.retry_delay) || out_of_range(o.retry_jitter) ||
             out_of_range(o.drift_extra) || out_of_range(o.max_hold) ||
             !(o.drift_factor >= 0 && o.drift_factor < 1) || !(o.extend_fraction > 0 && o.extend_fraction < 1) ||
             !exceeds_drift(o.ttl, {o.drift_factor, o.drift_extra});
  return bad ? make_error_code(dlock::error::invalid_argument) : error_code();
}

}  // namespace

std::uint64_t hook_acquire(const std::shared_ptr<lock_state>& s, acquire_base& op) {
  auto number = s->acquire_calls.fetch_add(1, std::memory_order_relaxed) + 1;
  auto any = asio::cancellation_type::terminal | asio::cancellation_type::partial | asio::cancellation_type::total;
  auto on_cancel = [weak = std::weak_ptr<lock_state>(s), number](asio::cancellation_type type) {
    if (auto state = weak.lock()) cancel_acquire(state, number, type);
  };
  op.hook_cancellation(s->executor, on_cancel, dlock::detail::forwarding::dispatch, any);
  return number;
}

void begin_acquire(std::shared_ptr<lock_state> s, std::uint64_t number, bool retry,
                   std::optional<std::chrono::milliseconds> limit, acquire_base op, bool in_place) {
  auto started = s->observed.started(retry);
  error_code refuse = validate_options(s->commands, s->opts);
  if (!refuse && limit && (*limit <= std::chrono::milliseconds::zero() || *limit > dlock::max_duration))
    refuse = dlock::error::invalid_argument;
  if (!refuse && s->holding()) refuse = dlock::error::already_held;
  if (!refuse && (s->acquiring || s->releasing)) refuse = dlock::error::in_progress;
  if (refuse) {
    s->observed.finished(started, refuse, 0, 0);
    // From the initiating function: never in place.
    return op.complete(dlock::detail::completion::post, s->executor, refuse);
  }
  s->acquiring = true;
  s->released = false;
  s->current_acquire = number;
  s->cancel_requested = false;
  s->cancellable = op.handler_slot().is_connected();
  auto deadline = steady_clock::now() + limit.value_or(s->opts.wait);
  acquire_machine machine(acquire_policy{retry, false},
                          retry_schedule(-1, s->opts.retry_delay, s->opts.retry_jitter, deadline));
  auto first = machine.start(s->cleanups_in_flight > 0);
  act(acquire_op{s, machine, std::move(op), in_place, {}, {}, 0, started, 0}, first);
}

}  // namespace dlock::redis::detail
