// The Redlock's extension, release and public handle. The acquire (the
// algorithm itself) is in redlock_acquire.cpp, the fan-out to the masters in
// redlock_fanout.cpp.
#include <dlock/redis/redlock.hpp>

#include "redlock_fanout.hpp"

#include <dlock/limits.hpp>
#include <dlock/log.hpp>
#include "redis/token.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

#include <optional>

namespace dlock::redis {
namespace detail {
namespace {

using std::chrono::milliseconds;
using handler0 = asio::any_completion_handler<void(error_code)>;

// ------------------------------------------------------------------ extend_op

// Why a hold cannot be extended: lost (as redis::lock says), or not held.
error_code not_extendable(const lock_engine& owner) {
  if (owner.acquiring) return dlock::error::not_held;
  return owner.hold.state() == hold::phase::lost ? dlock::error::lost : dlock::error::not_held;
}

/// Compare-and-PEXPIRE on every master, decided at the majority.
class extend_op final : public round_fanout {
 public:
  extend_op(std::shared_ptr<lock_engine> owner, milliseconds ttl, handler0 handler)
      : round_fanout(owner, round_kind::extend, ttl, redlock_clock::now()),
        ttl_(ttl),
        hold_id_(owner_->hold.id()),
        op_(std::move(handler)) {}

  void start() {
    owner_->commands.extend(command(), owner_->hold.token(), ttl_);
    send_to_all();
    arm_deadline();
  }

 private:
  std::string_view round_token() const noexcept override { return owner_->hold.token(); }
  void decided() override {
    const auto& round = attempt_.round();
    report_.decided(round.failure(), round.start());
    if (owner_->hold.id() != hold_id_ || !owner_->hold.held())
      return complete(not_extendable(*owner_));  // released or lost meanwhile
    owner_->note_outcomes(round);
    if (attempt_.won()) {
      owner_->hold.renew(round.start(), ttl_);
      return complete(error_code{});
    }
    auto verdict = attempt_.extend_failure();
    owner_->hold.extension_failed(attempt_.failure());
    if (verdict.loses) owner_->hold.lose(verdict.told);
    complete(verdict.told);
  }
  void complete(error_code ec) { op_.complete(dlock::detail::completion::dispatch, owner_->executor, ec); }

  milliseconds ttl_;
  std::uint64_t hold_id_;
  dlock::detail::op_base<void(error_code)> op_;
};

// The new release() of the hold: compare-and-delete on every master.
void send_release(std::shared_ptr<lock_engine> owner, std::string token, handler0 handler, bool in_place) {
  auto op = std::make_shared<release_fanout>(std::move(owner), token, std::move(handler), in_place);
  op->ends_release();
  op->start();
}

}  // namespace

void start_extend(std::shared_ptr<lock_engine> owner, milliseconds ttl, handler0 handler) {
  auto timeout = owner->options.master_timeout;
  if (ttl <= milliseconds::zero() || ttl > dlock::max_duration || (timeout > milliseconds::zero() && timeout >= ttl))
    return post_completion(owner->executor, std::move(handler), make_error_code(dlock::error::invalid_argument));
  if (owner->acquiring || !owner->hold.held())
    return post_completion(owner->executor, std::move(handler), not_extendable(*owner));
  auto op = std::make_shared<extend_op>(std::move(owner), ttl, std::move(handler));
  op->start();
}

void start_release(std::shared_ptr<lock_engine> owner, handler0 h, bool in_place) {
  if (owner->acquiring)  // a lost hold being acquired again: nothing to release
    return post_completion(owner->executor, std::move(h), make_error_code(dlock::error::not_held));
  if (owner->hold.state() == hold::phase::lost) {
    // lose() released the keys in the background already: tell the reason.
    auto reason = owner->hold.loss().reason();
    owner->hold.end();
    owner->released = true;
    owner->released_masters = 0;
    return post_completion(owner->executor, std::move(h), reason);
  }
  if (!owner->hold.held())
    return post_completion(owner->executor, std::move(h),
                           owner->released ? error_code() : make_error_code(dlock::error::not_held));
  owner->released = true;
  if (owner->every_master_closed()) {  // nothing can be sent: the keys go with their TTL
    owner->hold.end();                  // stops auto-extension too
    owner->released_masters = 0;
    return post_completion(owner->executor, std::move(h), make_error_code(dlock::error::closed));
  }
  owner->releasing = true;  // no acquire until it completes (see release_fanout::complete)
  auto token = owner->hold.token();
  if (!owner->options.auto_extend) {  // nothing to wait for
    owner->hold.end();
    return send_release(std::move(owner), std::move(token), std::move(h), in_place);
  }
  // No extension may land after the release: wait for one in flight. The
  // token is this hold's, taken now.
  auto& hold = owner->hold;
  hold.end(handler0([owner = std::move(owner), token = std::move(token), h = std::move(h), in_place](error_code) mutable {
    send_release(std::move(owner), std::move(token), std::move(h), in_place);
  }));
}

void abandon(std::shared_ptr<lock_engine> owner) {
  asio::post(owner->executor, [owner] {
    // An acquire in progress ends (operation_aborted): nobody could release what it took.
    cancel_acquire(*owner);
    if (owner->hold.state() != hold::phase::idle)
      owner->hold.end([owner](error_code) { owner->release_in_background(); });
  });
}

}  // namespace detail

// --------------------------------------------------------------------- redlock

namespace {

// Why the redlock cannot work with these arguments ("" when it can).
std::string invalid_arguments(const std::vector<std::shared_ptr<connection>>& masters, std::string_view key,
                              const redlock_options& options) {
  for (const auto& master : masters)
    if (!master) return "redlock: a master is null";
  // A master given twice would count twice toward the majority.
  for (std::size_t i = 0; i < masters.size(); ++i)
    for (std::size_t j = 0; j < i; ++j) {
      const auto &a = masters[i]->get_options(), &b = masters[j]->get_options();
      if (masters[i] == masters[j] || detail::same_master(a.host, a.port, b.host, b.port))
        return "redlock: master " + a.host + ":" + std::to_string(a.port) + " is given twice";
    }
  return std::string(detail::redlock_invalid_reason(options, masters.size(), key));
}

}  // namespace

// Bad arguments never throw: they are told by the first acquire, as on every
// dlock lock (the impl then gets no masters, so nothing can reach a null one).
redlock::redlock(asio::any_io_executor executor, std::vector<std::shared_ptr<connection>> masters,
                 std::string key, redlock_options options) {
  auto reason = invalid_arguments(masters, key, options);
  if (!reason.empty()) {
    masters.clear();
    if (dlock::detail::log_enabled(log_level::error)) dlock::detail::log(log_level::error, reason);
  }
  std::vector<std::shared_ptr<detail::connection_impl>> connections;
  for (auto& master : masters) connections.push_back(detail::connection_access::impl(*master));
  auto commands = detail::hold_commands::redlock(std::move(key), options.fencing);
  impl_ = std::make_shared<detail::lock_engine>(std::move(executor), std::move(connections), std::move(commands),
                                                options, lock_kind::redlock);
  if (!reason.empty()) impl_->invalid = dlock::error::invalid_argument;
  impl_->invalid_reason = std::move(reason);
  impl_->attach_hold();
}

redlock::~redlock() {
  if (impl_) detail::abandon(impl_);  // not when moved from
}

redlock::executor_type redlock::get_executor() const noexcept { return impl_->executor; }

void redlock::start_settle(handler0 handler) {
  auto waiter = std::make_shared<detail::lock_engine::settle_waiter>(
      detail::lock_engine::settle_waiter{dlock::detail::op_base<void(error_code)>(std::move(handler))});
  // A cancelled wait leaves the list at once; the deletes go on.
  auto on_cancel = [owner = std::weak_ptr(impl_), weak = std::weak_ptr(waiter)](asio::cancellation_type) {
    auto impl = owner.lock();
    auto w = weak.lock();
    if (!impl || !w) return;
    std::erase(impl->settle_waiters, w);
    w->op.complete(dlock::detail::completion::post, impl->executor, asio::error::operation_aborted);
  };
  waiter->op.hook_cancellation(impl_->executor, on_cancel);
  asio::post(impl_->executor, [impl = impl_, waiter = std::move(waiter)]() mutable {
    if (waiter->op.done()) return;  // cancelled on the way
    if (impl->cleanups_in_flight == 0)
      return waiter->op.complete(dlock::detail::completion::post, impl->executor, error_code());
    impl->settle_waiters.push_back(std::move(waiter));
  });
}

void redlock::start_lock(handler0 handler, bool retry, std::optional<std::chrono::milliseconds> wait,
                         bool in_place) {
  detail::start_acquire(impl_, std::move(handler), retry, wait, in_place);
}

void redlock::start_unlock(handler0 handler, bool in_place) {
  dlock::detail::dispatch_here(impl_->executor, [impl = impl_, h = std::move(handler), in_place]() mutable {
    detail::start_release(std::move(impl), std::move(h), in_place);
  });
}

void redlock::start_extend(std::chrono::milliseconds ttl, handler0 handler) {
  dlock::detail::dispatch_here(impl_->executor, [impl = impl_, ttl, h = std::move(handler)]() mutable {
    detail::start_extend(impl, ttl, std::move(h));
  });
}

bool redlock::held() const noexcept { return impl_->hold.held_and_valid(); }
std::int64_t redlock::fencing_token() const noexcept { return impl_->hold.fencing_token(); }

std::chrono::milliseconds redlock::validity() const noexcept {
  return impl_->hold.validity();
}

lock_loss& redlock::loss() noexcept { return impl_->hold.loss(); }
std::string redlock::last_outcomes() const { return impl_->last_outcomes(); }
std::string redlock::token() const { return impl_->hold.token(); }
std::size_t redlock::released_masters() const noexcept { return impl_->released_masters; }
const std::string& redlock::invalid_reason() const noexcept { return impl_->invalid_reason; }
const std::string& redlock::key() const noexcept { return impl_->commands.key; }
std::size_t redlock::masters() const noexcept { return impl_->masters.size(); }

}  // namespace dlock::redis
