// One hold of a Redis lock, one master or many: the token, how long the hold
// may be trusted (timing.hpp), the holder's loss signal, the watch that
// fires it when the validity runs out, and the auto-extension that renews
// it. Every member runs on the lock's executor, except the accessors marked
// "any thread".
#pragma once

#include "redis/locks/auto_extend.hpp"
#include "redis/locks/algorithm/acquire_machine.hpp"  // hold_phase
#include "redis/locks/algorithm/timing.hpp"

#include "detail/observed_lock.hpp"
#include "detail/stall_monitor_impl.hpp"

#include <dlock/lock_loss.hpp>
#include <dlock/stall_monitor.hpp>

#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace dlock::redis::detail {

class hold {
 public:
  using phase = hold_phase;

  hold(asio::any_io_executor executor, drift_rule drift);
  hold(const hold&) = delete;
  hold& operator=(const hold&) = delete;

  /// The object that owns this hold: the validity watch holds it weakly, so
  /// a lock destroyed with a watch pending is never touched again.
  void attach(std::weak_ptr<void> owner) { owner_ = std::move(owner); }
  /// Called after the loss signal fired (on the executor), e.g. to delete
  /// the keys in the background.
  void on_lost(std::function<void(error_code)> hook) { on_lost_ = std::move(hook); }
  /// Who is told when a hold ends or is extended (the lock's, outliving this hold).
  void observe(const dlock::detail::observed_lock* observed) { observed_ = observed; }
  /// Stalls count against every hold's validity (dlock/stall_monitor.hpp).
  void watch_stalls(std::shared_ptr<stall_monitor> monitor) { stall_ = std::move(monitor); }

  /// Acquired: `token` was set by commands sent at `sent` with `ttl`;
  /// `fencing_token` is the hold's fencing token (0: the lock has none).
  void begin(std::string_view token, steady_time sent, std::chrono::milliseconds ttl, std::int64_t fencing_token = 0);
  /// Keep it alive: `step` sends one extension and calls renew() on success.
  void extend_automatically(auto_extend_settings settings, auto_extender::step_function step);
  /// An extension sent at `sent` with `ttl` succeeded.
  void renew(steady_time sent, std::chrono::milliseconds ttl);
  /// An extension failed with `why` (the caller decides whether the hold is lost).
  void extension_failed(error_code why) const;
  /// The hold is lost (once): extension stops, the signal fires with `why`.
  void lose(error_code why);
  /// The hold ends (release, or the lock destroyed): the signal is disarmed
  /// and extension stops; `then` runs once no extension is in flight.
  void end(asio::any_completion_handler<void(error_code)> then);
  void end();  ///< the same, waiting for nothing

  phase state() const noexcept { return phase_; }  ///< any thread
  bool held() const noexcept { return phase_ == phase::held; }  ///< any thread
  /// Held with validity left: what the public held() says, so that it is never
  /// true with validity() at zero, even before the validity watch has run. Any thread.
  bool held_and_valid() const noexcept { return held() && validity() > std::chrono::milliseconds(0); }
  /// The validity left now (zero unless held). Any thread.
  std::chrono::milliseconds validity() const noexcept;
  /// The lateness the stall monitor saw lately (zero without one).
  std::chrono::milliseconds stall_margin() const noexcept;
  steady_time valid_until() const noexcept { return valid_until_.load(); }
  const std::string& token() const noexcept { return token_; }
  /// The fencing token while held, else 0. Any thread.
  std::int64_t fencing_token() const noexcept { return held() ? fencing_token_.load() : 0; }
  /// Changes with every begin, loss and end: an answer for an older hold is stale.
  std::uint64_t id() const noexcept { return id_; }
  std::uint64_t extensions() const noexcept { return extender_.extensions(); }
  lock_loss& loss() noexcept { return loss_; }
  const lock_loss& loss() const noexcept { return loss_; }

 private:
  void watch_validity();

  void ended(hold_end how, error_code why) const;
  void subscribe_to_stalls();
  void on_stall(std::uint64_t hold_id, std::chrono::nanoseconds lag);

  // What every hold's begin and end touch comes first (64 locks' holds must
  // share the cache); the validity timer itself and the loss handler last.
  std::atomic<phase> phase_{phase::idle};  // atomic: held() is read from any thread
  std::uint64_t id_ = 0;
  std::string token_;
  std::atomic<std::int64_t> fencing_token_{0};  // atomic: read from any thread
  steady_time acquired_{};
  std::atomic<steady_time> valid_until_{};  // atomic: validity() is read from any thread
  steady_time validity_timer_at_{};  // validity_timer_'s pending expiry; zero when idle
  drift_rule drift_;
  lock_loss loss_;
  const dlock::detail::observed_lock* observed_ = nullptr;
  std::shared_ptr<stall_monitor> stall_;
  dlock::detail::stall_subscription stall_watch_;  // while held, with a monitor
  auto_extender extender_;
  // One timer, re-armed lazily: it wakes at the earliest end it was set for
  // and checks the hold it finds then, so back-to-back holds cost no timer
  // update each.
  asio::steady_timer validity_timer_;
  std::weak_ptr<void> owner_;
  std::function<void(error_code)> on_lost_;
};

}  // namespace dlock::redis::detail
