#include "redis/locks/algorithm/attempt.hpp"

#include "redis/locks/algorithm/replies.hpp"
#include "redis/locks/hold_commands.hpp"


namespace dlock::redis::detail {

redlock_attempt::redlock_attempt(const hold_commands& commands, round_kind kind, std::size_t masters,
                                 std::chrono::milliseconds ttl, drift_rule drift, redlock_clock::time_point start)
    : round_(masters, ttl, drift, start, commands.fencing() && kind == round_kind::acquire),
      commands_(&commands),
      kind_(kind),
      resent_(masters, false) {}

error_code redlock_attempt::failure() const noexcept {
  if (write_back_failure_) return write_back_failure_;
  if (round_.state() == round_state::failed && commands_->one_server() && answered_error_) return answered_error_;
  return round_.failure();
}

bool redlock_attempt::may_have_landed() const noexcept {
  if (won()) return false;
  if (!commands_->one_server()) return true;
  return commands_->attempt_may_have_landed(transport_error_, failure());
}

redlock_attempt::extend_verdict redlock_attempt::extend_outcome(std::chrono::milliseconds stall_margin) const {
  bool in_time = round_.validity_at_decision() - stall_margin > std::chrono::milliseconds::zero();
  if (won() && in_time) return {};
  auto why = won() ? make_error_code(dlock::error::expired) : failure();
  if (!commands_->one_server()) return {make_error_code(dlock::error::lost), why, true};
  return {why, why, why == dlock::error::not_owned || why == dlock::error::expired};
}

redlock_attempt::reaction redlock_attempt::on_answer(std::size_t index, error_code ec, const reply& answer,
                                                     redlock_clock::time_point now, bool deadline_passed) {
  reaction out;
  auto own = commands_->unwrap(ec, answer).ec;  // a script's, inside a gathered block
  bool not_run = own == redis::error::script_not_run || own == redis::error::no_script;
  if (not_run && !deadline_passed && !std::exchange(resent_[index], true)) {
    out.resend = true;
    return out;
  }
  bool was_decided = round_.decided();
  auto answered = kind_ == round_kind::extend ? commands_->read_extend(ec, answer) : commands_->read_attempt(ec, answer);
  out.outcome = answered.outcome;
  if (!was_decided) {
    answered_error_ = answered.error;
    transport_error_ = ec;
  }
  // The time of a deciding answer must not be early: validity is measured
  // to it. A decided round ignores the time of later answers.
  round_.record(index, answered.outcome, now, answered.counter);
  out.decided = !was_decided && round_.decided();
  out.raise_counter = was_decided && round_.state() == round_state::acquired && round_.behind(index);
  out.release = kind_ == round_kind::acquire && round_.needs_late_release(index);
  return out;
}

bool redlock_attempt::on_deadline(redlock_clock::time_point now) {
  bool was_decided = round_.decided();
  round_.time_out_pending(now);
  return !was_decided && round_.decided();
}

boost::container::small_vector<std::size_t, 7> redlock_attempt::write_back_targets() const {
  boost::container::small_vector<std::size_t, 7> behind;
  for (std::size_t i = 0; i < round_.masters(); ++i)
    if (round_.behind(i)) behind.push_back(i);
  return behind;
}

std::size_t redlock_attempt::write_back_needed() const noexcept {
  auto at_token = round_.at_token(), quorum = round_.quorum();
  return at_token < quorum ? quorum - at_token : 0;
}

void redlock_attempt::written_back(error_code ec, redlock_clock::time_point now) {
  if (!ec && round_.validity(now) <= std::chrono::milliseconds::zero()) ec = dlock::error::expired;
  write_back_failure_ = ec;
}

}  // namespace dlock::redis::detail
