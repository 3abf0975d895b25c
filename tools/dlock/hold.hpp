// Acquire a lock, run CMD while holding it, release it: shared by lock and elect.
//
// `Lock` is any dlock::lockable (what `dlock lock` takes) or an election's
// candidacy wrapped to look like one (what `dlock elect` holds).
#pragma once

#include "dlock/child_process.hpp"
#include "dlock/environment.hpp"
#include "dlock/exit_status.hpp"
#include "dlock/race.hpp"
#include "dlock/run.hpp"
#include "dlock/supervise.hpp"

#include <dlock/error.hpp>
#include <dlock/lockable.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/this_coro.hpp>

#include <chrono>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace dlock::cli {

/// What the CLI holds: a dlock::basic_lockable (acquire, release, loss) that
/// can also try once. Every dlock::lockable is one.
template <class Lock>
concept holdable = dlock::basic_lockable<Lock> && requires(Lock& lock) {
  { lock.try_acquire(dlock::detail::signature_probe{}) } -> std::same_as<dlock::detail::probed<void(error_code)>>;
};

/// One with a fencing token (a dlock::fenced_lockable, or a candidacy's).
template <class Lock>
concept fenced = requires(const Lock& lock) {
  { lock.fencing_token() } noexcept -> std::same_as<std::int64_t>;
};

struct hold_settings {
  std::string name;                                  ///< the lock's path or key: DLOCK_LOCK_NAME
  std::vector<std::string> command;                  ///< CMD [ARGS...]
  std::optional<std::chrono::milliseconds> timeout;  ///< none: wait for ever; zero: one attempt
  std::chrono::milliseconds grace{5000};             ///< from SIGTERM to SIGKILL after a loss
};

/// How an acquisition raced against the timeout and the stop signals ended.
struct acquire_outcome {
  race_end end = race_end::operation;
  error_code error;  ///< the acquisition's, when it finished first
  int signo = 0;     ///< the signal's, when one came first
};

/// Maps an outcome to 0 (held) or the status to exit with, printing why.
int status_for(const acquire_outcome& outcome, const hold_settings& settings);
/// The same for connecting: 0 once connected, else why not (a failure: 125).
int status_for(const wait_end& ended, const hold_settings& settings);

/// True for --timeout 0: one attempt, bounded by itself (a zero timer would
/// beat it every time), so the timer is never armed.
bool one_attempt(const hold_settings& settings) noexcept;

/// Arms `deadline` for the whole wait, connecting included: once, when the
/// subcommand starts.
void arm_deadline(asio::steady_timer& deadline, const hold_settings& settings);

/// Runs CMD with `variables` added to the environment; returns the exit
/// status (after printing why) if it cannot be started, else 0.
int start_command(child_process& child, const hold_settings& settings, const std::vector<std::string>& variables);

/// Prints a release failure unless the loss was already reported.
void report_release(error_code ec, bool lost);

template <class Operation>
asio::awaitable<acquire_outcome> race_acquisition(Operation operation, asio::steady_timer* timer,
                                                  asio::signal_set* stop) {
  auto [order, ec, timer_ec, signal_ec, signo] = co_await race(std::move(operation), *timer, *stop);
  co_return acquire_outcome{first_finished(order[0]), ec, signo};
}

/// Acquires `lock` unless `deadline` (see arm_deadline) runs out or a signal in `stop` comes first.
template <holdable Lock>
asio::awaitable<int> acquire_within(Lock& lock, hold_settings settings, asio::steady_timer& deadline,
                                    asio::signal_set& stop) {
  acquire_outcome outcome;
  if (one_attempt(settings)) outcome = co_await race_acquisition(lock.try_acquire(asio::deferred), &deadline, &stop);
  else outcome = co_await race_acquisition(lock.acquire(asio::deferred), &deadline, &stop);
  co_return status_for(outcome, settings);
}

/// DLOCK_LOCK_NAME, and DLOCK_FENCING_TOKEN for locks that have one.
template <holdable Lock>
std::vector<std::string> lock_variables(Lock& lock, const std::string& name) {
  std::vector<std::string> out{std::string(lock_name_variable) + "=" + name};
  if constexpr (fenced<Lock>)
    out.push_back(std::string(fencing_token_variable) + "=" + std::to_string(lock.fencing_token()));
  return out;
}

/// The whole of `dlock lock` / `dlock elect` once connected; returns the exit status.
template <holdable Lock>
asio::awaitable<int> hold_while_running(Lock& lock, hold_settings settings, asio::steady_timer& deadline,
                                        asio::signal_set& stop) {
  child_process child(co_await asio::this_coro::executor);  // hears SIGCHLD from now on
  if (int status = co_await acquire_within(lock, settings, deadline, stop); status != exit_status::success)
    co_return status;
  int status = start_command(child, settings, lock_variables(lock, settings.name));
  if (status == exit_status::success) status = co_await supervise(child, lock.loss(), stop, settings.grace);
  // Released only now that CMD has exited (killed if need be): never while it runs.
  auto released = co_await lock.release(asio::as_tuple(asio::deferred));
  report_release(std::get<0>(released), lock.loss().lost());
  co_return status;
}

}  // namespace dlock::cli
