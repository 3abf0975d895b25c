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
  if (what == kind::lock) {  // the common case: no script, no text for the ttl
    command set{"SET", key, token, "NX", "PX"};
    set.arg(ttl.count());
    return encode(std::move(set));
  }
  auto ttl_text = std::to_string(ttl.count());
  if (what == kind::semaphore) {
    auto max = std::to_string(max_leases);
    return encode_eval(semaphore_acquire_script(),
                       connection::eval_tail({std::string_view(key)}, {token, ttl_text, max}));
  }
  return encode_eval(fenced_acquire_script(),
                     connection::eval_tail({std::string_view(key), std::string_view(counter_key)},
                                           {std::string_view(token), std::string_view(ttl_text)}));
}

error_code hold_commands::attempt_failure(error_code ec, const reply& answer, std::int64_t& fencing_token) const {
  if (ec) return ec;
  auto outcome = set_outcome::unexpected;
  switch (what) {
    case kind::lock: outcome = interpret_set(answer); break;
    case kind::semaphore: outcome = interpret_admit(answer); break;
    case kind::fenced_lock: {
      auto fenced = interpret_fenced_set(answer);
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
  return encode_eval(s, connection::eval_tail({std::string_view(key)}, {std::string_view(token)}));
}

encoded_command hold_commands::extend(const std::string& token, std::chrono::milliseconds ttl) const {
  auto ttl_text = std::to_string(ttl.count());
  const auto& s = what == kind::semaphore ? semaphore_extend_script() : extend_script();
  return encode_eval(s, connection::eval_tail({std::string_view(key)},
                                              {std::string_view(token), std::string_view(ttl_text)}));
}

}  // namespace dlock::redis::detail
