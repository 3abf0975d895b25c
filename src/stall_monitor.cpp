#include "detail/stall_monitor_impl.hpp"

#include <dlock/limits.hpp>

#include <algorithm>
#include <vector>

namespace dlock {
namespace detail {

namespace {
// The monitor has no operation to fail, so it takes every option, brought
// into the range where it works: a period of at least 1 ms (0 or less would
// rearm the timer without pause), a threshold of at least 1 ms (else every
// tick is a stall), and nothing beyond max_duration (the clock's nanoseconds
// would overflow).
stall_options in_range(stall_options o) {
  using std::chrono::milliseconds;
  o.period = std::clamp(o.period, milliseconds(1), dlock::max_duration);
  o.threshold = std::clamp(o.threshold, milliseconds(1), dlock::max_duration);
  o.memory = std::clamp(o.memory, milliseconds(0), dlock::max_duration);
  return o;
}
}  // namespace

stall_monitor_impl::stall_monitor_impl(asio::any_io_executor executor, stall_options options)
    : timer_(std::move(executor)),
      options_(in_range(std::move(options))),
      meter_(options_.period, options_.threshold, options_.memory) {}

void stall_monitor_impl::start() { arm(stall_meter::clock::now() + options_.period); }

void stall_monitor_impl::stop() { timer_.cancel(); }

void stall_monitor_impl::arm(stall_meter::clock::time_point due) {
  {
    std::lock_guard lock(mutex_);
    due_ = due;
  }
  timer_.expires_at(due);
  timer_.async_wait([weak = weak_from_this()](error_code ec) {
    auto self = weak.lock();
    if (self && !ec) self->on_tick();
  });
}

void stall_monitor_impl::on_tick() {
  auto ran = stall_meter::clock::now();
  std::optional<std::chrono::nanoseconds> stall;
  std::vector<subscriber> told;
  {
    std::lock_guard lock(mutex_);
    stall = meter_.on_tick(due_, ran);
    if (stall)
      for (const auto& [id, s] : subscribers_) told.push_back(s);
  }
  arm(meter_.next_due(ran));
  if (!stall) return;
  if (options_.observer) options_.observer->on_stall({*stall});
  for (const auto& s : told) s(*stall);
}

std::chrono::nanoseconds stall_monitor_impl::margin() const {
  std::lock_guard lock(mutex_);
  return meter_.margin(stall_meter::clock::now(), due_);
}
std::chrono::nanoseconds stall_monitor_impl::last_stall() const {
  std::lock_guard lock(mutex_);
  return meter_.last_stall();
}
std::uint64_t stall_monitor_impl::stalls() const {
  std::lock_guard lock(mutex_);
  return meter_.stalls();
}

std::uint64_t stall_monitor_impl::subscribe(subscriber s) {
  std::lock_guard lock(mutex_);
  auto id = next_id_++;
  subscribers_.emplace(id, std::move(s));
  return id;
}

void stall_monitor_impl::unsubscribe(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  subscribers_.erase(id);
}

}  // namespace detail

stall_monitor::stall_monitor(asio::any_io_executor executor, stall_options options)
    : impl_(std::make_shared<detail::stall_monitor_impl>(std::move(executor), std::move(options))) {
  impl_->start();
}

stall_monitor::~stall_monitor() { impl_->stop(); }

std::chrono::nanoseconds stall_monitor::margin() const noexcept {
  try {
    return impl_->margin();
  } catch (...) {  // a mutex that cannot lock: no margin known
    return {};
  }
}
std::chrono::nanoseconds stall_monitor::last_stall() const noexcept {
  try {
    return impl_->last_stall();
  } catch (...) {
    return {};
  }
}
std::uint64_t stall_monitor::stalls() const noexcept {
  try {
    return impl_->stalls();
  } catch (...) {
    return 0;
  }
}

}  // namespace dlock
