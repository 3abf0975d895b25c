#include "redis/locks/algorithm/attempt.hpp"

#include "redis/locks/algorithm/replies.hpp"
#include "redis/locks/algorithm/scripts.hpp"

#include <limits>
#include <string_view>

namespace dlock::redis::detail {

redlock_attempt::redlock_attempt(const hold_commands& commands, round_kind kind, std::size_t masters,
                                 std::chrono::milliseconds ttl, drift_rule drift, redlock_clock::time_point start)
    : reader_(commands.reader()),
      kind_(kind),
      round_(masters, ttl, drift, start, reader_.fencing() && kind == round_kind::acquire) {}

error_code redlock_attempt::failure() const noexcept {
  if (write_back_failure_) return write_back_failure_;
  if (round_.state() == round_state::failed && reader_.one_server() && answered_error_) return answered_error_;
  return round_.failure();
}

bool redlock_attempt::may_have_landed() const noexcept {
  if (won()) return false;
  if (!reader_.one_server()) return true;
  return reader_.attempt_may_have_landed(transport_error_, failure());
}

redlock_attempt::extend_verdict redlock_attempt::extend_outcome(std::chrono::milliseconds stall_margin) const {
  bool in_time = round_.validity_at_decision() - stall_margin > std::chrono::milliseconds::zero();
  if (won() && in_time) return {};
  auto why = won() ? make_error_code(dlock::error::expired) : failure();
  if (!reader_.one_server()) return {make_error_code(dlock::error::lost), why, true};
  return {why, why, why == dlock::error::not_owned || why == dlock::error::expired};
}

redlock_attempt::reaction redlock_attempt::on_answer(std::size_t index, error_code ec, const reply& answer,
                                                     redlock_clock::time_point now, bool deadline_passed) {
  reaction out;
  auto own = reader_.unwrap(ec, answer);  // a script's, inside a gathered block
  bool not_run = script_did_not_run(own.ec);
  if (not_run && resent_.empty()) resent_.resize(round_.masters());  // sized at the first NOSCRIPT
  if (not_run && !deadline_passed && !std::exchange(resent_[index], true)) {
    out.resend = true;
    return out;
  }
  bool was_decided = round_.decided();
  auto answered = reader_.read(own, kind_ == round_kind::extend);
  out.outcome = answered.outcome;
  if (!was_decided && reader_.one_server()) {  // only one server's are read
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

// ---------------------------------------------------------------- hold_commands

hold_commands hold_commands::lock(std::string key, bool fencing) {
  hold_commands c;
  if (fencing) {
    c.what = kind::fenced_lock;
    c.counter_key = fencing_counter_key(key);
  }
  c.key = std::move(key);
  return c;
}

hold_commands hold_commands::semaphore(std::string key, std::size_t max_leases) {
  hold_commands c;
  c.key = std::move(key);
  c.what = kind::semaphore;
  c.max_leases = max_leases;
  return c;
}

hold_commands hold_commands::redlock(std::string key, bool fencing) {
  hold_commands c;
  c.what = fencing ? kind::fenced_redlock : kind::redlock;
  if (fencing) c.counter_key = fencing_counter_key(key);
  c.key = std::move(key);
  return c;
}

void hold_commands::wait_for_replicas(int replicas, std::chrono::milliseconds timeout) {
  if (replicas <= 0) return;
  waits = true;
  replicas_ = replicas;
  wait_replicas_ = std::to_string(replicas);
  wait_timeout_ = std::to_string(timeout.count());
}

error_code hold_commands::invalid(std::chrono::milliseconds ttl) const {
  if (what == kind::semaphore && max_leases == 0) return dlock::error::invalid_argument;
  return validate(key, ttl);
}

void hold_commands::attempt(inline_command& out, std::string_view token, std::chrono::milliseconds ttl) const {
  attempt_alone(out, token, ttl);
  if (waits) out.then({"WAIT", wait_replicas_, wait_timeout_});
}

void hold_commands::attempt_alone(inline_command& out, std::string_view token, std::chrono::milliseconds ttl) const {
  decimal ttl_text(ttl.count());
  switch (what) {
    case kind::lock:
    case kind::redlock: return out.set({"SET", key, token, "NX", "PX", ttl_text});
    case kind::fenced_redlock: return out.set(redlock_fenced_acquire_script(), {key, counter_key}, {token, ttl_text});
    case kind::semaphore: {
      decimal max(max_leases);
      return out.set(semaphore_acquire_script(), {key}, {token, ttl_text, max});
    }
    case kind::fenced_lock:
      // MULTI; SET key token NX PX ttl; INCR counter; EXEC: one atomic step,
      // as a script would be, at about a third of a script's cost to the
      // server (benchmarks/RESULTS.md). The INCR runs whether or not the SET
      // did: a taken attempt uses up a number, and tokens still grow. Four
      // replies, EXEC's array the answer.
      return out.set_block({{"MULTI"}, {"SET", key, token, "NX", "PX", ttl_text}, {"INCR", counter_key}, {"EXEC"}});
  }
}

void hold_commands::release(inline_command& out, std::string_view token) const {
  out.set(what == kind::semaphore ? semaphore_release_script() : release_script(), {key}, {token});
}

void hold_commands::extend(inline_command& out, std::string_view token, std::chrono::milliseconds ttl) const {
  decimal ttl_text(ttl.count());
  out.set(what == kind::semaphore ? semaphore_extend_script() : extend_script(), {key}, {token, ttl_text});
  if (waits) out.then({"WAIT", wait_replicas_, wait_timeout_});
}

// ---------------------------------------------------------------- answer_reader

answer_reader::unwrapped answer_reader::unwrap_gathered(const reply& r) const {
  // Gathered: the command's answer is the reply before WAIT's (EXEC's for a block).
  if (!r.is_array() || r.elements().size() < 2 || !r.elements().back().is_integer())
    return {redis::error::protocol_error, &r};
  const reply& own = r.elements()[r.elements().size() - 2];
  error_code own_ec = own.is_error() ? make_error_code(classify_error(own.string())) : error_code();
  return {own_ec, &own, r.elements().back().integer()};
}

// What the command did, unless fewer replicas than asked have it.
answer_reader::answer answer_reader::acknowledged(answer a, std::int64_t replicas) const {
  if (a.outcome != master_outcome::ok || replicas < 0) return a;
  if (replicas < replicas_) return {master_outcome::failed, a.counter, dlock::error::not_replicated};
  return a;
}

answer_reader::answer answer_reader::read(const unwrapped& own, bool extend) const {
  if (own.ec) return {master_outcome::failed, redlock_round::no_counter, own.ec};
  const reply& r = *own.answer;
  auto alone = extend ? read_extend_alone(r) : one_server() ? read_one_server_attempt(r) : read_redlock_attempt(r);
  return replicas_ > 0 ? acknowledged(alone, own.acknowledged) : alone;
}

answer_reader::answer answer_reader::read_attempt(error_code ec, const reply& r) const {
  return read(unwrap(ec, r), false);
}

answer_reader::answer answer_reader::read_extend(error_code ec, const reply& r) const {
  return read(unwrap(ec, r), true);
}

answer_reader::answer answer_reader::read_one_server_attempt(const reply& r) const {
  std::int64_t fencing_token = redlock_round::no_counter;
  auto failure = attempt_failure({}, r, fencing_token);
  if (!failure) return {master_outcome::ok, fencing_token, {}};
  if (failure == dlock::error::taken) return {master_outcome::taken, fencing_token, failure};
  return {master_outcome::failed, redlock_round::no_counter, failure};
}

namespace {
// Built only when needed: an error code's category is a call.
answer_reader::answer unexpected_answer() {
  return {master_outcome::failed, redlock_round::no_counter, redis::error::protocol_error};
}
}  // namespace

answer_reader::answer answer_reader::read_redlock_attempt(const reply& r) const {
  if (what_ == hold_kind::fenced_redlock) {
    auto fenced = interpret_redlock_fenced_set(r);
    if (fenced.outcome == set_outcome::unexpected) return unexpected_answer();
    if (fenced.outcome == set_outcome::acquired) return {master_outcome::ok, fenced.counter, {}};
    // A holder's counter at INT64_MAX leaves no larger token to take: such
    // a master cannot vouch for ours (and counter + 1 would overflow).
    if (fenced.counter == std::numeric_limits<std::int64_t>::max()) return unexpected_answer();
    return {master_outcome::taken, fenced.counter, dlock::error::taken};
  }
  switch (interpret_set(r)) {
    case set_outcome::acquired: return {master_outcome::ok, redlock_round::no_counter, {}};
    case set_outcome::taken: return {master_outcome::taken, redlock_round::no_counter, dlock::error::taken};
    case set_outcome::unexpected: break;
  }
  return unexpected_answer();
}

answer_reader::answer answer_reader::read_extend_alone(const reply& r) const {
  auto compared = interpret_compare_script(r);
  if (compared == dlock::error::not_owned) return {master_outcome::taken, redlock_round::no_counter, compared};
  if (compared) return {master_outcome::failed, redlock_round::no_counter, compared};
  return {master_outcome::ok, redlock_round::no_counter, {}};
}

bool answer_reader::attempt_may_have_landed(error_code ec, error_code failure) const {
  if (!failure) return true;                          // won
  if (failure == dlock::error::taken) return false;  // the server said no
  // Only a plain SET refused with an error reply surely did nothing. No
  // reply, a reply we did not expect, an error from a block or a script
  // whose earlier steps ran (an INCR that failed after the SET; MULTI
  // refused alone, so that the SET ran outside the block) may have set the
  // key: the cleanup deletes it by token.
  bool refused_plain_set = what_ == hold_kind::lock && ec && !set_outcome_unknown(ec);
  return !refused_plain_set;
}

error_code answer_reader::attempt_failure(error_code ec, const reply& r, std::int64_t& fencing_token) const {
  if (ec) return ec;
  auto outcome = set_outcome::unexpected;
  switch (what_) {
    case hold_kind::lock:
    case hold_kind::redlock: outcome = interpret_set(r); break;
    case hold_kind::semaphore: outcome = interpret_admit(r); break;
    case hold_kind::fenced_lock:
    case hold_kind::fenced_redlock: {
      // EXEC ran the block, but the INCR failed (the counter holds no
      // integer, or it would overflow): the server's own error.
      if (auto refused = fenced_exec_error(r)) return refused;
      auto fenced = interpret_fenced_exec(r);
      outcome = fenced.outcome;
      fencing_token = fenced.fencing_token;
      break;
    }
  }
  switch (outcome) {
    case set_outcome::acquired: return {};
    case set_outcome::taken: return dlock::error::taken;
    case set_outcome::unexpected: break;
  }
  return redis::error::protocol_error;
}

}  // namespace dlock::redis::detail
