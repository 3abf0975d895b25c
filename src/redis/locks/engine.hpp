// The one Redis lock shell: a lock_engine drives a hold on N servers, one
// for redis::lock and redis::semaphore, N for redis::redlock, through
// fan-outs that send one command to every master at once (with Redlock's
// per-master timeout: connection_api.hpp), doing what algorithm/ decides
// (algorithm/attempt.hpp's hold_commands says what is sent).
// Private to src/redis/locks/.
#pragma once

#include <dlock/redis/connection.hpp>
#include <dlock/redis/redlock.hpp>

#include "detail/observed_lock.hpp"
#include "detail/op_base.hpp"
#include "redis/connection/connection_api.hpp"
#include "redis/locks/algorithm/acquire_machine.hpp"
#include "redis/locks/algorithm/attempt.hpp"
#include "redis/locks/algorithm/cleanup_ledger.hpp"
#include "redis/locks/algorithm/quorum.hpp"
#include "redis/locks/algorithm/round.hpp"
#include "redis/locks/algorithm/scripts.hpp"
#include "redis/locks/algorithm/timing.hpp"
#include "redis/locks/hold.hpp"

#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace dlock::redis::detail {

/// The shared state of one lock (a `redlock`, a `lock`, a `semaphore`);
/// lives on its executor. It is the set of connections its fan-outs send to.
class lock_engine : public connection_set, public std::enable_shared_from_this<lock_engine>, public master_watcher {
 public:
  /// `options.master_timeout` zero: none (one server, whose connection's
  /// command timeout applies). `invalid_reason` not empty: the arguments
  /// are unusable, every acquire is refused with invalid_argument.
  static std::shared_ptr<lock_engine> make(asio::any_io_executor executor,
                                           std::vector<std::shared_ptr<connection_impl>> masters,
                                           hold_commands commands, redlock_options options, lock_kind kind,
                                           std::string invalid_reason);
  /// Through make() only, which wires the hold to the shared engine.
  lock_engine(asio::any_io_executor executor, std::vector<std::shared_ptr<connection_impl>> masters,
              hold_commands commands, redlock_options options, lock_kind kind, std::string invalid_reason);

  // What every operation reads comes first (64 locks' engines must share
  // the cache); what only a log, a retry or a handle's end reads, last.
  bool acquiring = false;  // an acquire has not completed yet
  bool releasing = false;  // a release() has not completed yet
  // The last hold was released (or lost and released): a second release() is
  // a no-op that succeeds. Cleared when an acquire starts.
  bool released = false;
  /// The handle is gone (set from its thread): an acquire gives up.
  std::atomic<bool> abandoned{false};
  const bool unusable;  // invalid_reason is not empty
  std::uint64_t rounds = 0;  // numbers each round, for `granted`
  /// Fencing: the largest token a hold of this lock was given. A token not
  /// above it went back (token_went_back): every counter is raised to it.
  std::int64_t highest_fencing_token = 0;
  std::size_t released_masters = 0;  // by the last release(), when it completed
  std::weak_ptr<void> acquire_in_progress;  // ~redlock ends it (cancel_acquire)
  dlock::detail::observed_lock observed;  // who is told of this lock's events
  hold_commands commands;  // the key, and what is sent to it
  redlock_options options;
  /// The token, validity, loss signal and auto-extension of the current hold.
  detail::hold hold;

  /// Every master's connection was closed for good (by its owner, or
  /// destroyed): operations then give `closed` (a master merely down is
  /// retried instead).
  bool every_master_closed() const noexcept;
  /// What decides a call's refusal and a release's steps (acquire_machine.hpp).
  lock_status status() const noexcept;
  drift_rule hold_drift() const noexcept { return {options.drift_factor, options.drift_extra}; }
  /// A round (acquire) won with `token`, whose SETs were sent at `start`.
  void begin_hold(std::string_view token, redlock_clock::time_point start, std::int64_t fencing_token);

  /// What each master answered in the last round, for logs.
  std::string last_outcomes() const { return describe(names, granted.outcomes()); }
  double random_unit();

  // Background deletes (a lost attempt's, a lost or abandoned hold's), on
  // handlers that ignore any caller's cancellation. No SET is sent while
  // one is unanswered: see algorithm/acquire_machine.hpp.

  /// Compare-and-delete of `token` on every master, or on one.
  void release_in_background(std::string_view token, std::optional<std::size_t> master = std::nullopt);
  /// Fencing (step 4 of acquire.cpp): max(counter, `token`) on `targets`,
  /// told to `report` once `needed` of them confirmed (or cannot); without a
  /// report, only raised, in the background.
  void write_back(std::int64_t token, std::size_t needed, std::span<const std::size_t> targets,
                  std::function<void(error_code)> report);
  /// The background deletes in flight, who waits for none, and the ones to
  /// send again (algorithm/cleanup_ledger.hpp): before the next SET on
  /// their master, and when its connection is back.
  cleanup_ledger cleanups;
  void note_unsettled(std::size_t master, std::string attempt_token, error_code why);
  /// Every master's, or one master's.
  void resend_unsettled_cleanups(std::optional<std::size_t> master = std::nullopt);

  /// Failover: who granted the hold, and each master's epoch then. A hold
  /// whose masters were replaced under it is lost with failed_over.
  grant_record granted;
  grant_record::epochs master_epochs() const;
  /// A master's connection saw a new master (on its own thread).
  void on_master_changed(std::uint64_t epoch) override;
  void check_failover();
  bool fencing_went_back(std::int64_t token) {  // inline: run on every acquire
    if (!token_went_back(token, highest_fencing_token)) return false;
    raise_counters(token);
    return true;
  }

  const std::string invalid_reason;
  std::vector<std::string> names;  // "host:port", for logs
  /// The pause between an acquire's attempts (one acquire at a time): one
  /// timer per lock, not one per acquire (a service lookup each).
  asio::steady_timer retry_pause;

 private:
  void on_lost(error_code why);
  void raise_counters(std::int64_t token_that_went_back);

  std::minstd_rand random_;
};

/// A lock's fan-out (connection_api.hpp): its engine is the connection
/// set it sends to.
class lock_fanout : public fanout {
 protected:
  explicit lock_fanout(std::shared_ptr<lock_engine> owner)
      : fanout(std::move(owner)), owner_(static_cast<lock_engine*>(to_.get())) {}
  lock_engine* const owner_;  // `to_`, as the lock it is
};

/// A fan-out decided by a redlock_attempt (algorithm/attempt.hpp): an
/// acquire's SETs or an extend. It performs what each answer asks; the
/// decision itself goes to decided().
class round_fanout : public lock_fanout {
 protected:
  round_fanout(std::shared_ptr<lock_engine> owner, round_kind kind, std::chrono::milliseconds ttl,
               redlock_clock::time_point start);
  virtual void decided() = 0;
  /// The token the round's commands carry (an acquire's late yes is released with it).
  virtual std::string_view round_token() const noexcept = 0;
  /// Notes the decision for the observer.
  void report_decision();
  /// Notes each master's answer as the one the hold stands on.
  void note_decision();

  // What every answer reads first (the report is a null pointer unless observed).
  round_report report_;
  std::uint64_t round_id_;
  redlock_attempt attempt_;

 private:
  void on_answer(std::size_t index, error_code ec, const reply& answer) final;
  void on_deadline() final;
  void on_all_answered() final;
};

// The operations every lock shares; the public handles (lock.cpp,
// redlock.cpp) only forward to them.

/// acquire(), try_acquire(), acquire_for() (acquire.cpp); from any thread.
void start_acquire(std::shared_ptr<lock_engine> owner, asio::any_completion_handler<void(error_code)> handler,
                   bool retry, std::optional<std::chrono::milliseconds> wait, bool in_place);
/// Ends the acquire in progress, if any, with operation_aborted (on the executor).
void cancel_acquire(lock_engine& owner);

/// Compare-and-PEXPIRE to `ttl` on every master, deciding at the majority.
/// From any thread, as is the next one.
void start_extend(std::shared_ptr<lock_engine> owner, std::chrono::milliseconds ttl,
                  asio::any_completion_handler<void(error_code)> handler);
/// release(): compare-and-delete of the held token on every master, told
/// to `handler` as soon as the outcome is known (a majority released, or
/// cannot); `in_place`: it runs on the executor.
void start_release(std::shared_ptr<lock_engine> owner, asio::any_completion_handler<void(error_code)> handler,
                   bool in_place);
/// The deletes of release(), once its hold ended: the compare-and-delete
/// of `token` on every master (engine.cpp, where the fan-outs are).
void send_release(std::shared_ptr<lock_engine> owner, std::string_view token,
                  asio::any_completion_handler<void(error_code)> done, bool in_place);
/// The handle is gone (from any thread): an acquire in progress ends, a
/// hold is released in the background.
void abandon(std::shared_ptr<lock_engine> owner);
/// settle(): completes once no background delete is in flight (from any thread).
void start_settle(std::shared_ptr<lock_engine> owner, asio::any_completion_handler<void(error_code)> handler);

using dlock::detail::post_completion;

}  // namespace dlock::redis::detail
