// redis::basic_hold, redis::lock and redis::semaphore: the lock engine
// (engine.hpp) over one server, as redis::redlock is over N. Only the
// commands (hold_commands, algorithm/attempt.hpp) and the options' words differ.
#include <dlock/redis/lock.hpp>
#include <dlock/redis/semaphore.hpp>

#include "detail/op_base.hpp"
#include "redis/locks/algorithm/options.hpp"
#include "redis/locks/engine.hpp"

namespace dlock::redis {
namespace detail {
namespace {

// Why the lock cannot work with these arguments ("" when it can).
std::string invalid_arguments(const hold_commands& what, const lock_options& o) {
  bool fenced_lease = o.fencing && what.what == hold_commands::kind::semaphore;  // a lease has no fencing token
  if (what.invalid(o.ttl) || fenced_lease || invalid_lock_options(o))
    return "redis lock " + what.key + ": invalid arguments";
  return {};
}

std::shared_ptr<lock_engine> one_server_engine(connection& conn, hold_commands commands, const lock_options& o,
                                               lock_kind kind) {
  auto invalid = invalid_arguments(commands, o);
  commands.wait_for_replicas(o.replicas, o.replica_timeout);
  auto impl = connection_access::impl(conn);
  auto executor = impl->executor();
  return lock_engine::make(std::move(executor), std::vector{std::move(impl)}, std::move(commands),
                           engine_options(o), kind, std::move(invalid));
}

}  // namespace
}  // namespace detail

basic_hold::basic_hold(std::shared_ptr<detail::lock_engine> engine, lock_options options)
    : engine_(std::move(engine)), options_(std::move(options)) {}

basic_hold::~basic_hold() {
  if (engine_) detail::abandon(engine_);  // not when moved from
}

void basic_hold::start_acquire(bool retry, std::optional<std::chrono::milliseconds> wait, handler_type handler,
                               bool in_place) {
  detail::start_acquire(engine_, std::move(handler), retry, wait, in_place);
}
void basic_hold::start_release(handler_type handler, bool in_place) {
  detail::start_release(engine_, std::move(handler), in_place);
}
void basic_hold::start_extend(std::chrono::milliseconds ttl, handler_type handler) {
  detail::start_extend(engine_, ttl, std::move(handler));
}

asio::any_io_executor basic_hold::get_executor() const noexcept { return engine_->executor; }
// A lost hold is not held, although release() is still to be called (it
// tells the loss's reason).
bool basic_hold::held() const noexcept { return engine_->hold.held_and_valid(); }
std::chrono::milliseconds basic_hold::validity() const noexcept { return engine_->hold.validity(); }
const std::string& basic_hold::token() const noexcept { return engine_->hold.token(); }
const std::string& basic_hold::key() const noexcept { return engine_->commands.key; }
lock_loss& basic_hold::loss() noexcept { return engine_->hold.loss(); }
std::uint64_t basic_hold::extensions() const noexcept { return engine_->hold.extensions(); }

lock::lock(connection& conn, std::string key, lock_options opts)
    : basic_hold(detail::one_server_engine(conn, detail::hold_commands::lock(std::move(key), opts.fencing), opts,
                                           lock_kind::redis_lock),
                 opts) {}

std::int64_t lock::fencing_token() const noexcept { return engine_->hold.fencing_token(); }
const lock_options& lock::options() const noexcept { return options_; }

semaphore::semaphore(connection& conn, std::string key, std::size_t max_leases, semaphore_options opts)
    : basic_hold(detail::one_server_engine(conn, detail::hold_commands::semaphore(std::move(key), max_leases), opts,
                                           lock_kind::redis_semaphore),
                 opts) {}

std::size_t semaphore::max_leases() const noexcept { return engine_->commands.max_leases; }
const semaphore_options& semaphore::options() const noexcept { return options_; }

}  // namespace dlock::redis
