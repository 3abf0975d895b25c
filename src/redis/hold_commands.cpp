#include "hold_commands.hpp"

#include "redis/engine/replies.hpp"
#include "redis/engine/scripts.hpp"

#include <string_view>

namespace dlock::redis::detail {

hold_commands hold_commands::lock(std::string key, bool fencing) {
  hold_commands c;
  if (fencing) {
    c.what = kind::fenced_lock;
    c.counter_key = fencing_counter_key(key);
    c.fenced_block_end_ = command{"INCR", c.counter_key}.encoded() + command{"EXEC"}.encoded();
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

error_code hold_commands::invalid(std::chrono::milliseconds ttl) const {
  if (what == kind::semaphore && max_leases == 0) return dlock::error::invalid_argument;
  return validate(key, ttl);
}

encoded_command hold_commands::attempt(const std::string& token, std::chrono::milliseconds ttl) const {
  if (what != kind::semaphore) {  // no script, no text for the ttl
    command set{"SET", key, token, "NX", "PX"};
    set.arg(ttl.count());
    if (what == kind::lock) return encode(std::move(set));
    return fenced_attempt(set);
  }
  auto ttl_text = std::to_string(ttl.count());
  auto max = std::to_string(max_leases);
  return encode_eval(semaphore_acquire_script(), {key}, {token, ttl_text, max});
}

// MULTI; SET key token NX PX ttl; INCR counter; EXEC: one atomic step, as a
// script would be, at about a third of a script's cost to the server
// (benchmarks/RESULTS.md, "Fencing's cost"). The INCR runs whether or not
// the SET did: a taken attempt uses up a number, and tokens still grow.
encoded_command hold_commands::fenced_attempt(const command& set) const {
  constexpr std::string_view multi = "*1\r\n$5\r\nMULTI\r\n*6\r\n";  // and SET's header: 6 arguments
  encoded_command block;
  block.wire.reserve(multi.size() + set.body().size() + fenced_block_end_.size());
  block.wire.append(multi).append(set.body()).append(fenced_block_end_);
  block.replies = 4;  // +OK, +QUEUED twice, then EXEC's array: the answer
  return block;
}

bool hold_commands::attempt_may_have_landed(error_code ec, error_code failure) const {
  if (!failure) return true;                          // won
  if (failure == dlock::error::taken) return false;  // the server said no
  // Only a plain SET refused with an error reply surely did nothing. No
  // reply, a reply we did not expect, an error from a block or a script
  // whose earlier steps ran (an INCR that failed after the SET; MULTI
  // refused alone, so that the SET ran outside the block) may have set the
  // key: the cleanup deletes it by token.
  bool refused_plain_set = what == kind::lock && ec && !set_outcome_unknown(ec);
  return !refused_plain_set;
}

error_code hold_commands::attempt_failure(error_code ec, const reply& answer, std::int64_t& fencing_token) const {
  if (ec) return ec;
  auto outcome = set_outcome::unexpected;
  switch (what) {
    case kind::lock: outcome = interpret_set(answer); break;
    case kind::semaphore: outcome = interpret_admit(answer); break;
    case kind::fenced_lock: {
      // EXEC ran the block, but the INCR failed (the counter holds no
      // integer, or it would overflow): the server's own error.
      if (auto refused = fenced_exec_error(answer)) return refused;
      auto fenced = interpret_fenced_exec(answer);
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

encoded_command hold_commands::release(const std::string& token) const {
  const auto& s = what == kind::semaphore ? semaphore_release_script() : release_script();
  return encode_eval(s, {key}, {token});
}

encoded_command hold_commands::extend(const std::string& token, std::chrono::milliseconds ttl) const {
  auto ttl_text = std::to_string(ttl.count());
  const auto& s = what == kind::semaphore ? semaphore_extend_script() : extend_script();
  return encode_eval(s, {key}, {token, ttl_text});
}

}  // namespace dlock::redis::detail
