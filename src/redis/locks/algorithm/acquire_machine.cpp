#include "redis/locks/algorithm/acquire_machine.hpp"

#include <dlock/error.hpp>

#include <boost/asio/error.hpp>

namespace dlock::redis::detail {

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
