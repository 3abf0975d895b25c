#include "redis/locks/algorithm/acquire_machine.hpp"

#include <dlock/error.hpp>
#include <dlock/limits.hpp>

#include <boost/asio/error.hpp>

#include <algorithm>
#include <cmath>

namespace dlock::redis::detail {

using std::chrono::milliseconds;

retry_schedule::retry_schedule(int retries, milliseconds delay, milliseconds jitter,
                               std::optional<clock::time_point> deadline) noexcept
    : retries_(retries), delay_(delay), jitter_(jitter), deadline_(deadline) {}

std::optional<milliseconds> retry_schedule::next(clock::time_point now, double random) noexcept {
  if (retries_ >= 0 && attempts_ > retries_) return std::nullopt;
  random = std::clamp(random, 0.0, 1.0);
  auto offset = std::llround((2.0 * random - 1.0) * static_cast<double>(jitter_.count()));
  auto pause = std::max(milliseconds::zero(), delay_ + milliseconds(offset));
  // An attempt that would start after the deadline could not finish before it.
  if (deadline_ && now + pause >= *deadline_) return std::nullopt;
  ++attempts_;
  return pause;
}

retry_schedule retry_schedule::for_acquire(const redlock_options& o, std::optional<milliseconds> wait,
                                           clock::time_point (*now)()) noexcept {
  auto deadline_after = [now](milliseconds d) -> std::optional<clock::time_point> {
    if (d <= milliseconds::zero() || d > dlock::max_duration) return std::nullopt;
    return now() + d;
  };
  if (wait) return retry_schedule(-1, o.retry_delay, o.retry_jitter, deadline_after(*wait));
  return retry_schedule(o.retry_count, o.retry_delay, o.retry_jitter, deadline_after(o.wait_limit));
}

// ------------------------------------------------------ what a call is told

error_code acquire_refusal(const lock_status& lock, std::optional<milliseconds> wait) noexcept {
  bool bad_wait = wait && (*wait <= milliseconds::zero() || *wait > dlock::max_duration);
  if (lock.invalid_arguments || bad_wait) return dlock::error::invalid_argument;
  if (lock.every_master_closed) return dlock::error::closed;
  bool holding = lock.one_server ? lock.hold != hold_phase::idle : lock.hold == hold_phase::held;
  if (holding) return dlock::error::already_held;
  if (lock.acquiring || lock.releasing) return dlock::error::in_progress;
  return {};
}

error_code extend_refusal(const lock_status& lock) noexcept {
  if (!lock.acquiring && lock.hold == hold_phase::held) return {};
  return !lock.acquiring && lock.hold == hold_phase::lost ? dlock::error::lost : dlock::error::not_held;
}

release_plan plan_release(const lock_status& lock) noexcept {
  using step = release_plan::step;
  if (lock.acquiring) return {step::tell, dlock::error::not_held};  // a lost hold being taken again
  if (lock.hold == hold_phase::lost) return {step::end_and_tell, {}, true};
  if (lock.hold == hold_phase::idle) return {step::tell, lock.released ? error_code() : dlock::error::not_held};
  if (lock.every_master_closed) return {step::end_and_tell, dlock::error::closed};
  return {step::send, {}};
}

// ------------------------------------------------------------ acquire_machine

using kind = acquire_action::kind;

acquire_action acquire_machine::start(bool cleanups_in_flight) noexcept {
  if (step_ != step::idle) {  // refused; the acquire under way goes on
    return acquire_action::make(kind::complete, dlock::error::in_progress);
  }
  return next_attempt(cleanups_in_flight);
}

acquire_action acquire_machine::next_attempt(bool cleanups_in_flight) noexcept {
  if (cleanups_in_flight) {
    step_ = step::waiting_for_cleanups;
    return acquire_action::make(kind::wait_for_cleanups);
  }
  step_ = step::attempting;
  return acquire_action::make(kind::send_attempt);
}

acquire_action acquire_machine::cleanups_settled() noexcept {
  if (step_ != step::waiting_for_cleanups) return acquire_action::make(kind::none);  // stale
  return next_attempt(false);
}

acquire_action acquire_machine::attempt_decided(error_code failure, bool may_have_landed,
                                                std::chrono::milliseconds validity_left, clock::time_point now,
                                                double random) noexcept {
  if (step_ != step::attempting) return acquire_action::make(kind::none);  // stale: an abandoned attempt
  // A yes read after the key's own ttl ran out (the client paused between the
  // send and the read) proves nothing: another client may hold the key now.
  if (!failure && validity_left <= std::chrono::milliseconds::zero()) {
    failure = dlock::error::expired;
    may_have_landed = true;
  }
  if (!failure) return complete({});
  // A token that went back (engine's fencing_went_back) is retried as a taken key is.
  bool taken = failure == dlock::error::taken || failure == dlock::error::stale_token;
  if (!policy_.retry || (!taken && !policy_.retry_when_broken)) return complete(failure, may_have_landed);
  auto pause = schedule_.next(now, random);
  if (!pause) return complete(taken ? make_error_code(dlock::error::timed_out) : failure, may_have_landed);
  step_ = step::pausing;
  auto action = acquire_action::make(kind::pause, {}, may_have_landed);
  action.pause = *pause;
  return action;
}

acquire_action acquire_machine::pause_over(bool cleanups_in_flight) noexcept {
  if (step_ != step::pausing) return acquire_action::make(kind::none);  // stale
  return next_attempt(cleanups_in_flight);
}

acquire_action acquire_machine::cancel() noexcept {
  if (step_ == step::done) return acquire_action::make(kind::none);  // over already
  bool attempt_out = step_ == step::attempting;
  return complete(boost::asio::error::operation_aborted, attempt_out);
}

acquire_action acquire_machine::complete(error_code result, bool delete_attempt) noexcept {
  step_ = step::done;
  return acquire_action::make(kind::complete, result, delete_attempt);
}

}  // namespace dlock::redis::detail
