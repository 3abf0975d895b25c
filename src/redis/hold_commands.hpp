// What a hold on one Redis server is made of: a lock's key, or one lease in
// a semaphore's sorted set. redis::lock and redis::semaphore share one shell
// (lock_state.hpp: acquire, background cleanup, release, extend, the hold);
// only these commands, and what their answers mean, differ.
#pragma once

#include "connection_impl.hpp"

#include <dlock/redis/reply.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace dlock::redis::detail {

struct hold_commands {
  /// A lock on `key` (SET NX PX; with `fencing`, in a MULTI block with INCR).
  static hold_commands lock(std::string key, bool fencing);
  /// One lease of a semaphore of `max_leases` kept in the sorted set `key`.
  static hold_commands semaphore(std::string key, std::size_t max_leases);

  enum class kind { lock, fenced_lock, semaphore };

  kind what = kind::lock;
  std::string key;
  std::string counter_key;     // a fenced lock's counter, else empty
  std::size_t max_leases = 0;  // a semaphore's, else 0

  /// Arguments no attempt can work with (an empty key, `ttl` <= 0, a semaphore of 0).
  error_code invalid(std::chrono::milliseconds ttl) const;
  /// One attempt to take the hold as `token` for `ttl`.
  encoded_command attempt(const std::string& token, std::chrono::milliseconds ttl) const;
  /// What the attempt's answer means: empty when the hold is now ours (and,
  /// with fencing, `fencing_token` set), `taken`, or the error.
  error_code attempt_failure(error_code ec, const reply& answer, std::int64_t& fencing_token) const;
  /// An attempt answered `ec` (or a reply that means `failure`) may still
  /// have taken the hold: it must be deleted by its token.
  bool attempt_may_have_landed(error_code ec, error_code failure) const;
  /// Ends `token`'s hold, nobody else's: 1 when it was still ours.
  encoded_command release(const std::string& token) const;
  /// Moves `token`'s expiry to `ttl` from now while it is still ours: 1 when so.
  encoded_command extend(const std::string& token, std::chrono::milliseconds ttl) const;

 private:
  encoded_command fenced_attempt(const command& set) const;

  std::string fenced_block_end_;  // a fenced lock's "INCR counter; EXEC", encoded once
};

}  // namespace dlock::redis::detail
