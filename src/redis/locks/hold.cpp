#include "redis/locks/hold.hpp"

#include <boost/asio/dispatch.hpp>

namespace dlock::redis::detail {

hold::hold(asio::any_io_executor executor, drift_rule drift)
    : drift_(drift), loss_(executor), extender_(executor), validity_timer_(executor) {}

// The token is copied into the last hold's buffer: no allocation after the first.
void hold::begin(std::string_view token, steady_time sent, std::chrono::milliseconds ttl, std::int64_t fencing_token) {
  token_.assign(token);
  fencing_token_ = fencing_token;
  phase_ = phase::held;
  ++id_;
  acquired_ = sent;
  valid_until_ = detail::valid_until(sent, ttl, drift_);
  loss_.arm();
  watch_validity();
  subscribe_to_stalls();
}

void hold::extend_automatically(auto_extend_settings settings, auto_extender::step_function step) {
  // The extender forgets `failed` when it is destroyed, with this hold.
  extender_.start(settings, acquired_, std::move(step), [this](error_code ec) { lose(ec); });
}

void hold::renew(steady_time sent, std::chrono::milliseconds ttl) {
  auto before = validity();
  valid_until_ = detail::valid_until(sent, ttl, drift_);
  watch_validity();
  if (observed_ && *observed_) observed_->extension({}, before, validity());
}

void hold::extension_failed(error_code why) const {
  if (!observed_ || !*observed_) return;
  auto left = validity();
  observed_->extension(why, left, left);
}

void hold::ended(hold_end how, error_code why) const {
  if (observed_) observed_->ended(acquired_, how, why);
}

void hold::lose(error_code why) {
  if (phase_ != phase::held) return;
  phase_ = phase::lost;
  ++id_;
  stall_watch_.reset();
  if (extender_.running()) extender_.stop([](error_code) {});
  ended(hold_end::lost, why);
  loss_.fire(why);
  if (on_lost_) on_lost_(why);
}

void hold::end() {
  if (phase_ == phase::held) ended(hold_end::released, {});
  stall_watch_.reset();
  phase_ = phase::idle;
  ++id_;
  loss_.disarm();
  // Not extending (the common case): nothing to stop, and stopping would
  // post a completion per release.
  if (extender_.running()) extender_.stop([](error_code) {});
}

void hold::end(asio::any_completion_handler<void(error_code)> then) {
  if (phase_ == phase::held) ended(hold_end::released, {});
  stall_watch_.reset();
  phase_ = phase::idle;
  ++id_;
  loss_.disarm();
  extender_.stop(std::move(then));
}

// Less the lateness the stall monitor saw lately: a stall like it may be
// going on right now, unseen.
std::chrono::milliseconds hold::validity() const noexcept {
  if (phase_ != phase::held) return std::chrono::milliseconds(0);
  auto end = valid_until_.load();
  if (stall_) end -= std::chrono::duration_cast<steady_time::duration>(stall_->margin());
  return remaining(end, std::chrono::steady_clock::now());
}

std::chrono::milliseconds hold::stall_margin() const noexcept {
  if (!stall_) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(stall_->margin());
}

// The monitor calls on its executor; the hold is looked at on its own.
void hold::subscribe_to_stalls() {
  if (!stall_) return;
  auto executor = validity_timer_.get_executor();
  stall_watch_ = dlock::detail::stall_subscription(
      stall_, [this, owner = owner_, id = id_, executor](std::chrono::nanoseconds lag) {
        asio::dispatch(executor, [this, owner, id, lag] {
          if (auto alive = owner.lock()) this->on_stall(id, lag);
        });
      });
}

// A stall as long as the validity left could happen again before the next
// look: the hold cannot be trusted, whatever the clock still says.
void hold::on_stall(std::uint64_t hold_id, std::chrono::nanoseconds lag) {
  if (hold_id != id_ || phase_ != phase::held) return;
  if (std::chrono::steady_clock::now() + lag >= valid_until_.load()) lose(make_error_code(dlock::error::stalled));
}

// Nothing but an extension renews a hold, so its loss is signalled when the
// validity runs out, whether or not anyone extends it: past that point
// another client may hold the lock (with_lock then cancels the body).
void hold::watch_validity() {
  auto until = valid_until_.load();
  if (validity_timer_at_ != steady_time{} && validity_timer_at_ <= until) return;
  validity_timer_at_ = until;
  validity_timer_.expires_at(until);
  validity_timer_.async_wait([this, owner = owner_](error_code ec) {
    auto alive = owner.lock();
    if (!alive || ec) return;  // gone, or re-armed for an earlier end
    validity_timer_at_ = steady_time{};
    if (phase_ != phase::held) return;
    if (std::chrono::steady_clock::now() < valid_until_.load()) return watch_validity();  // a later hold, or extended
    lose(make_error_code(dlock::error::lost));
  });
}

}  // namespace dlock::redis::detail
