// What a Redis hold sends and what the answers mean, for every kind the one
// lock shell (engine.hpp) drives: a lock on one server, a
// semaphore's lease, and a Redlock's key on each of its masters. The shell's
// steps are the same for all; only these commands and their reading differ.
#pragma once

#include "redis/connection/connection_impl.hpp"
#include "redis/locks/algorithm/round.hpp"

#include <dlock/redis/reply.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::redis::detail {

struct hold_commands {
  /// A lock on one server (SET NX PX; with `fencing`, in a MULTI block with INCR).
  static hold_commands lock(std::string key, bool fencing);
  /// One lease of a semaphore of `max_leases` kept in the sorted set `key`.
  static hold_commands semaphore(std::string key, std::size_t max_leases);
  /// A Redlock's key on each master (SET NX PX; with `fencing`, a script
  /// that also reports the master's counter).
  static hold_commands redlock(std::string key, bool fencing);

  enum class kind { lock, fenced_lock, semaphore, redlock, fenced_redlock };

  /// Replica acknowledgement (lock_options::replicas): every attempt and
  /// extension is followed by WAIT `replicas` `timeout`.
  void wait_for_replicas(int replicas, std::chrono::milliseconds timeout);

  kind what = kind::lock;
  std::string key;
  std::string counter_key;     // a fenced lock's counter, else empty
  std::size_t max_leases = 0;  // a semaphore's, else 0

  /// One server: its error is the acquire's answer, and a broken attempt is
  /// not retried (a Redlock expects a broken minority and retries).
  bool one_server() const noexcept { return what != kind::redlock && what != kind::fenced_redlock; }
  bool fencing() const noexcept { return what == kind::fenced_lock || what == kind::fenced_redlock; }

  /// Arguments no attempt can work with (an empty key, `ttl` <= 0, a semaphore of 0).
  error_code invalid(std::chrono::milliseconds ttl) const;

  /// One attempt to take the hold as `token` for `ttl`.
  void attempt(inline_command& out, std::string_view token, std::chrono::milliseconds ttl) const;
  /// Ends `token`'s hold, nobody else's: 1 when it was still ours.
  void release(inline_command& out, std::string_view token) const;
  /// Moves `token`'s expiry to `ttl` from now while it is still ours: 1 when so.
  void extend(inline_command& out, std::string_view token, std::chrono::milliseconds ttl) const;

  /// One master's answer to an attempt or an extension, as a round counts it.
  struct answer {
    master_outcome outcome = master_outcome::failed;
    std::int64_t counter = redlock_round::no_counter;  // fencing: the master's counter
    error_code error;  // why it failed (`outcome` failed), or `taken`
  };
  answer read_attempt(error_code ec, const reply& r) const;
  answer read_extend(error_code ec, const reply& r) const;
  /// With replica acknowledgement an answer is every reply gathered,
  /// [..., the command's answer, WAIT's count]: the command's own error (or
  /// `ec`), its answer, and the count (without: `ec`, `r` and no count).
  struct unwrapped {
    error_code ec;
    const reply* answer;
    std::int64_t acknowledged = -1;
  };
  unwrapped unwrap(error_code ec, const reply& r) const;

  /// One server: what the attempt's answer means: empty when the hold is now
  /// ours (and, with fencing, `fencing_token` set), `taken`, or the error.
  error_code attempt_failure(error_code ec, const reply& r, std::int64_t& fencing_token) const;
  /// An attempt answered `ec` (or a reply that means `failure`) may still
  /// have taken the hold: it must be deleted by its token.
  bool attempt_may_have_landed(error_code ec, error_code failure) const;

 private:
  answer read_redlock_attempt(const reply& r) const;
  void attempt_alone(inline_command& out, std::string_view token, std::chrono::milliseconds ttl) const;
  answer read_attempt_alone(error_code ec, const reply& r) const;
  answer read_extend_alone(error_code ec, const reply& r) const;
  answer acknowledged(answer a, std::int64_t replicas) const;

  int replicas_ = 0;           // lock_options::replicas
  std::string wait_replicas_;  // WAIT's arguments; empty: no WAIT
  std::string wait_timeout_;
};

}  // namespace dlock::redis::detail
