// The state of one hold on one Redis server, a redis::lock or a
// redis::semaphore's lease (which differ only in their commands,
// hold_commands.hpp), shared by the files of that shell: lock.cpp (release,
// extend, the public handles' glue), lock_acquire.cpp (the acquire shell) and
// lock_cleanup.cpp (undoing an attempt in the background). It lives on the
// connection's executor; every function here runs there.
#pragma once

#include <dlock/redis/lock.hpp>

#include "connection_impl.hpp"
#include "detail/observed_lock.hpp"
#include "detail/op_base.hpp"
#include "hold_commands.hpp"
#include "redis/engine/acquire_machine.hpp"
#include "redis/engine/hold.hpp"
#include "redis/token.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <optional>
#include <random>
#include <string>

namespace dlock::redis::detail {

struct lock_state;

/// One acquire: the machine's actions, done by one object that moves from
/// the connection's reply to the pause timer and back (no allocation, no
/// coroutine per step). The caller's slot is hooked once, for the whole
/// acquire (cancel_acquire); each step (the SET, the pause) is bound to the
/// lock's own step signal, which that hook emits.
struct acquire_op {
  std::shared_ptr<lock_state> s;
  acquire_machine machine;
  dlock::detail::op_base<void(error_code)> op;  // the caller's handler
  bool in_place;      // the caller runs on the lock's executor
  std::string token;  // the attempt's, fresh for each
  steady_time sent{};
  int sends = 0;  // of this attempt's script, which a NOSCRIPT sends again
  steady_time started{};        // when observed: the acquire's call
  std::uint32_t attempts = 0;   // attempts sent, for the observer

  using cancellation_slot_type = asio::cancellation_slot;
  cancellation_slot_type get_cancellation_slot() const noexcept;

  void operator()(error_code ec, reply answer);  ///< the SET NX PX was answered
  void operator()(error_code ec);                ///< the pause between attempts is over
};

struct lock_state : std::enable_shared_from_this<lock_state> {
  lock_state(std::shared_ptr<connection_impl> c, hold_commands what, lock_options o)
      : conn(std::move(c)),
        executor(conn->executor()),
        commands(std::move(what)),
        opts(std::move(o)),
        observed(opts.observer, conn->opts().observer, commands.key,
                 commands.what == hold_commands::kind::semaphore ? lock_kind::redis_semaphore : lock_kind::redis_lock),
        hold(executor, drift_rule{opts.drift_factor, opts.drift_extra}),
        retry_pause(executor),
        random(jitter_seed()) {
    hold.observe(&observed);
    hold.watch_stalls(conn->opts().stall);
  }

  /// Held, or lost and not released yet.
  bool holding() const noexcept { return hold.state() != hold::phase::idle; }

  // The connection's internals, shared: a connection destroyed first fails
  // the lock's commands with dlock::error::closed.
  std::shared_ptr<connection_impl> conn;
  asio::any_io_executor executor;
  hold_commands commands;  // the key, and what is sent to it
  lock_options opts;       // a semaphore's too (refused with fencing on)
  dlock::detail::observed_lock observed;  // who is told of this lock's events
  // One operation at a time: at most one of these is true (or holding()).
  bool acquiring = false;
  bool releasing = false;
  // The last hold was released (or given up by ~lock): a second release is a
  // no-op that succeeds, as on every dlock lock. Cleared when an acquire starts.
  bool released = false;
  bool destroyed = false;  // ~lock ran: an acquire in progress gives up
  // Undos of attempts sent and not answered yet (see acquire_machine.hpp).
  int cleanups_in_flight = 0;
  std::optional<acquire_op> waiting;  // the acquire waiting for them
  // A cancellation of the acquire is recorded here, not only passed on to
  // the step under way: a step that finished just before (a pause timer
  // already expired, a reply already read) would drop it, and the acquire
  // would wait on. Every step looks at the record before the next.
  std::atomic<std::uint64_t> acquire_calls{0};  // numbers the acquires, from any thread
  std::uint64_t current_acquire = 0;              // the one under way (when acquiring)
  bool cancel_requested = false;
  bool cancellable = false;                       // the caller's handler has a slot
  asio::cancellation_signal step_cancel;
  detail::hold hold;
  asio::steady_timer retry_pause;  // between attempts; cancelled by ~lock
  std::minstd_rand random;
};

using lock_handler = asio::any_completion_handler<void(error_code)>;

// lock.cpp
/// One compare-and-PEXPIRE (or lease extension) of the held token; renews the hold on success.
asio::awaitable<error_code> extend_held(std::shared_ptr<lock_state> s, std::chrono::milliseconds ttl);

// lock_acquire.cpp
using acquire_base = dlock::detail::op_base<void(error_code)>;
/// In the initiating function: hooks the caller's slot (cancel_acquire, on
/// the lock's executor) and returns the acquire's number for begin_acquire.
std::uint64_t hook_acquire(const std::shared_ptr<lock_state>& s, acquire_base& op);
void begin_acquire(std::shared_ptr<lock_state> s, std::uint64_t number, bool retry,
                   std::optional<std::chrono::milliseconds> limit, acquire_base op, bool in_place);
/// An acquire waiting for cleanups gives up (cancelled, or the lock destroyed).
void stop_waiting(const std::shared_ptr<lock_state>& s);
/// The last cleanup in flight was answered: a waiting acquire goes on.
void resume_waiting(const std::shared_ptr<lock_state>& s);

// lock_cleanup.cpp
/// Best effort, in the background: release `token`'s hold (compare-and-delete),
/// until the server ran it or the hold has surely expired. No attempt is sent meanwhile.
void start_cleanup(const std::shared_ptr<lock_state>& s, std::string token);
/// The server did not run a script (not in its cache, and the connection
/// could not fall back to EVAL without reordering): send it again.
bool not_run(error_code ec);
constexpr int max_cleanup_sends = 10;

}  // namespace dlock::redis::detail
