// What a lock tells its observer (include/dlock/observer.hpp), in one place
// for every recipe. Resolved once, when the lock is made: its own observer,
// else its client's or connection's, else none; with none, every call below
// is one pointer test and reads no clock.
#pragma once

#include <dlock/observer.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace dlock::detail {

class observed_lock {
 public:
  using clock = std::chrono::steady_clock;

  observed_lock() = default;
  /// `own` if set, else `fallback`.
  observed_lock(std::shared_ptr<observer> own, const std::shared_ptr<observer>& fallback, std::string name,
                lock_kind kind)
      : keep_(own ? std::move(own) : fallback), to_(keep_.get()), name_(std::move(name)), kind_(kind) {}

  explicit operator bool() const noexcept { return to_ != nullptr; }
  observer* to() const noexcept { return to_; }
  lock_id id() const noexcept { return {name_, kind_}; }

  /// An acquire began now; returns when (for `finished`), or nothing when unobserved.
  clock::time_point started(bool waits) const noexcept {
    if (!to_) return {};
    to_->on_acquire_started({id(), waits});
    return clock::now();
  }
  void finished(clock::time_point started, error_code outcome, std::uint32_t attempts,
                std::int64_t fencing_token) const noexcept {
    if (!to_) return;
    to_->on_acquire_finished({id(), outcome, clock::now() - started, attempts, outcome ? 0 : fencing_token});
  }
  /// A hold that began at `since` ended.
  void ended(clock::time_point since, hold_end how, error_code reason) const noexcept {
    if (!to_) return;
    to_->on_hold_ended({id(), how, reason, clock::now() - since});
  }
  void extension(error_code outcome, std::chrono::milliseconds before, std::chrono::milliseconds after) const noexcept {
    if (to_) to_->on_extended({id(), outcome, before, after});
  }

 private:
  std::shared_ptr<observer> keep_;
  observer* to_ = nullptr;
  std::string name_;
  lock_kind kind_ = lock_kind::zk_mutex;
};

}  // namespace dlock::detail
