#include "redis/engine/attempt.hpp"

#include "redis/engine/replies.hpp"

#include <limits>

namespace dlock::redis::detail {

redlock_attempt::redlock_attempt(round_kind kind, std::size_t masters, std::chrono::milliseconds ttl,
                                 drift_rule drift, redlock_clock::time_point start, bool fencing)
    : round_(masters, ttl, drift, start, fencing && kind == round_kind::acquire),
      kind_(kind),
      fencing_(fencing && kind == round_kind::acquire),
      resent_(masters, false) {}

redlock_attempt::classified redlock_attempt::classify(error_code ec, const reply& answer) const {
  if (ec) return {master_outcome::failed};
  if (kind_ == round_kind::extend) {
    auto compared = interpret_compare_script(answer);
    if (compared == dlock::error::not_owned) return {master_outcome::taken};
    return {compared ? master_outcome::failed : master_outcome::ok};
  }
  if (fencing_) {
    auto fenced = interpret_redlock_fenced_set(answer);
    if (fenced.outcome == set_outcome::unexpected) return {master_outcome::failed};
    auto outcome = fenced.outcome == set_outcome::acquired ? master_outcome::ok : master_outcome::taken;
    // A holder's counter at INT64_MAX leaves no larger token to take: such
    // a master cannot vouch for ours (and counter + 1 would overflow).
    if (outcome == master_outcome::taken && fenced.counter == std::numeric_limits<std::int64_t>::max())
      return {master_outcome::failed};
    return {outcome, fenced.counter};
  }
  switch (interpret_set(answer)) {
    case set_outcome::acquired: return {master_outcome::ok};
    case set_outcome::taken: return {master_outcome::taken};
    case set_outcome::unexpected: break;
  }
  return {master_outcome::failed};
}

redlock_attempt::reaction redlock_attempt::on_answer(std::size_t index, error_code ec, const reply& answer,
                                                     redlock_clock::time_point now, bool deadline_passed) {
  reaction out;
  bool not_run = ec == redis::error::script_not_run || ec == redis::error::no_script;
  if (not_run && !deadline_passed && !std::exchange(resent_[index], true)) {
    out.resend = true;
    return out;
  }
  bool was_decided = round_.decided();
  auto answered = classify(ec, answer);
  out.outcome = answered.outcome;
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
