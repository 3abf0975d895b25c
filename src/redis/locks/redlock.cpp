// redis::redlock, the public handle: the lock engine (engine.hpp) over N
// masters. The algorithm itself is in acquire.cpp.
#include <dlock/redis/redlock.hpp>

#include "redis/locks/algorithm/options.hpp"
#include "redis/locks/engine.hpp"

#include <dlock/log.hpp>


#include <optional>

namespace dlock::redis {

using handler0 = asio::any_completion_handler<void(error_code)>;
// --------------------------------------------------------------------- redlock

namespace {

// Why the redlock cannot work with these arguments ("" when it can).
std::string invalid_arguments(const std::vector<std::shared_ptr<connection>>& masters, std::string_view key,
                              const redlock_options& options) {
  std::vector<const redis::options*> each;
  for (const auto& master : masters) each.push_back(master ? &master->get_options() : nullptr);
  if (auto reason = detail::redlock_masters_invalid(each); !reason.empty()) return reason;
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
  impl_ = detail::lock_engine::make(std::move(executor), std::move(connections), std::move(commands), options,
                                    lock_kind::redlock, std::move(reason));
}

redlock::~redlock() {
  if (impl_) detail::abandon(impl_);  // not when moved from
}

redlock::executor_type redlock::get_executor() const noexcept { return impl_->executor; }

void redlock::start_settle(handler0 handler) { detail::start_settle(impl_, std::move(handler)); }

void redlock::start_lock(handler0 handler, bool retry, std::optional<std::chrono::milliseconds> wait,
                         bool in_place) {
  detail::start_acquire(impl_, std::move(handler), retry, wait, in_place);
}

void redlock::start_unlock(handler0 handler, bool in_place) { detail::start_release(impl_, std::move(handler), in_place); }
void redlock::start_extend(std::chrono::milliseconds ttl, handler0 handler) {
  detail::start_extend(impl_, ttl, std::move(handler));
}

bool redlock::held() const noexcept { return impl_->hold.held_and_valid(); }
std::int64_t redlock::fencing_token() const noexcept { return impl_->hold.fencing_token(); }

std::chrono::milliseconds redlock::validity() const noexcept { return impl_->hold.validity(); }
lock_loss& redlock::loss() noexcept { return impl_->hold.loss(); }
std::string redlock::last_outcomes() const { return impl_->last_outcomes(); }
const std::string& redlock::token() const noexcept { return impl_->hold.token(); }
std::size_t redlock::released_masters() const noexcept { return impl_->released_masters; }
const std::string& redlock::invalid_reason() const noexcept { return impl_->invalid_reason; }
const std::string& redlock::key() const noexcept { return impl_->commands.key; }
std::size_t redlock::masters() const noexcept { return impl_->masters.size(); }

}  // namespace dlock::redis
