/// @file
/// Hooks for metrics and tracing: an observer that dlock tells what its
/// locks, sessions, connections and queues do, with the figures an operator
/// wants (how long an acquire waited, how long a lock was held, how it ended,
/// how much validity an extension left, how each Redlock master answered).
///
/// Install one per ZooKeeper client or Redis connection (their options'
/// `observer`), or per lock (the lock's options, which win). With none
/// installed nothing is measured: each event costs one pointer test.
///
/// Calls come on the executor of what they are about (the client's strand,
/// the connection's executor), inline: an observer must not block, and should
/// post rather than call a dlock operation. One observer shared by objects on
/// several threads must be thread-safe. The events' string views and spans
/// are valid during the call only. A Redis lock destroyed while held tells
/// its hold's end from the destructor's thread.
#pragma once

#include <dlock/config.hpp>

#include <chrono>
#include <cstdint>
#include <span>
#include <string_view>

namespace dlock {

namespace zk {
enum class session_state;
}
namespace redis {
enum class connection_state : std::uint8_t;
}

/// Which recipe a lock event is about.
enum class lock_kind : std::uint8_t {
  zk_mutex,         ///< zk::mutex (and the mutex under a leader election)
  zk_read_lock,     ///< zk::shared_mutex's reader
  zk_write_lock,    ///< zk::shared_mutex's writer
  zk_simple_lock,   ///< zk::simple_lock
  zk_semaphore,     ///< zk::semaphore (one event per acquire of n leases)
  redis_lock,       ///< redis::lock
  redis_semaphore,  ///< redis::semaphore
  redlock,          ///< redis::redlock
};

/// The kind's name ("zk_mutex", ...), for labels.
std::string_view to_string(lock_kind kind) noexcept;

/// The lock an event is about: its path (ZooKeeper) or key (Redis).
struct lock_id {
  std::string_view name;  ///< the path or key
  lock_kind kind;         ///< the recipe
};

/// An acquire (or try_acquire) began.
struct acquire_started {
  lock_id lock;  ///< which lock
  bool waits;    ///< false for try_acquire
};

/// An acquire ended: held (`outcome` empty), refused, taken, timed out, cancelled...
struct acquire_finished {
  lock_id lock;                     ///< which lock
  error_code outcome;               ///< empty: held
  std::chrono::nanoseconds waited;  ///< from the call to the completion
  std::uint32_t attempts;           ///< tries at the server (SET NX rounds, node creations)
  std::int64_t fencing_token;       ///< when held and the lock has one, else 0
};

/// How a hold ended.
enum class hold_end : std::uint8_t {
  released,  ///< release(), or the lock destroyed while held
  lost,      ///< the session or the validity went first (the reason says which)
};

/// A hold ended: exactly one per successful acquire.
struct hold_ended {
  lock_id lock;                       ///< which lock
  hold_end how;                       ///< released or lost
  error_code reason;                  ///< why it was lost; empty when released
  std::chrono::nanoseconds held_for;  ///< from the acquire's success
};

/// An extension of a Redis hold (by `extend()` or auto-extension) was answered.
struct extended {
  lock_id lock;                                ///< which lock
  error_code outcome;                          ///< empty: the validity was renewed
  std::chrono::milliseconds validity_before;  ///< left when the answer came, before renewing
  std::chrono::milliseconds validity_after;   ///< left after renewing (= before on failure)
};

/// One master's answer in a Redlock round.
enum class master_answer : std::uint8_t {
  yes,        ///< set (or extended) our key
  taken,      ///< another holder's key is there
  failed,     ///< an error (connection lost, a server error)
  timed_out,  ///< no answer within the master timeout
};

/// A master's part in a Redlock round.
struct master_vote {
  std::string_view master;            ///< "host:port"
  master_answer answer;               ///< what it said
  error_code error;                   ///< for `failed` and `timed_out`
  std::chrono::nanoseconds latency;   ///< from the round's start to the answer (or the timeout)
};

/// What a Redlock round was for.
enum class round_kind : std::uint8_t { acquire, extend };

/// A Redlock round settled: every master answered or timed out.
struct redlock_round {
  lock_id lock;                            ///< which lock
  round_kind kind;                         ///< acquire or extend
  error_code decision;                     ///< empty: a majority said yes in time
  std::chrono::nanoseconds decided_after;  ///< from the round's start to the decision
  std::span<const master_vote> masters;    ///< in the order of the redlock's masters
};

/// A ZooKeeper client's session changed state.
struct zk_session_changed {
  std::string_view hosts;  ///< the client's connect string
  zk::session_state state;  ///< the new state
};

/// A Redis connection changed state.
struct redis_connection_changed {
  std::string_view server;  ///< "host:port"
  redis::connection_state state;  ///< the new state
  error_code reason;        ///< why it dropped, when it did
  std::uint64_t reconnects;  ///< connections made after the first
};

/// A queue offer was answered.
struct queue_offered {
  std::string_view path;          ///< the queue's
  error_code outcome;             ///< empty: the item is in the queue
  std::chrono::nanoseconds took;  ///< from the call to the answer
};

/// A queue take (or poll) was answered.
struct queue_taken {
  std::string_view path;            ///< the queue's
  error_code outcome;               ///< empty: an item was taken
  std::chrono::nanoseconds waited;  ///< from the call to the answer
};

/// The event loop ran a timer late by `lag` (a stall_monitor saw it).
struct stall_detected {
  std::chrono::nanoseconds lag;  ///< how late the timer ran
};

/// Receives dlock's events. Every member does nothing by default: override
/// those you want.
class observer {
 public:
  virtual ~observer() = default;

  virtual void on_acquire_started(const acquire_started&) noexcept {}    ///< an acquire began
  virtual void on_acquire_finished(const acquire_finished&) noexcept {}  ///< an acquire completed
  virtual void on_hold_ended(const hold_ended&) noexcept {}              ///< a hold ended
  virtual void on_extended(const extended&) noexcept {}                  ///< an extension was answered
  virtual void on_redlock_round(const redlock_round&) noexcept {}        ///< a Redlock round settled
  virtual void on_zk_session(const zk_session_changed&) noexcept {}      ///< a session changed state
  virtual void on_redis_connection(const redis_connection_changed&) noexcept {}  ///< a connection changed state
  virtual void on_queue_offered(const queue_offered&) noexcept {}        ///< an offer was answered
  virtual void on_queue_taken(const queue_taken&) noexcept {}            ///< a take or poll was answered
  virtual void on_stall(const stall_detected&) noexcept {}               ///< a stall_monitor saw a stall
};

}  // namespace dlock
