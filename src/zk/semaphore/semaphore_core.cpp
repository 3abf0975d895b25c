// The semaphore object's life: argument checks, the leases held and their
// loss, release, and the background cleanup when the object goes away.
#include "semaphore_core.hpp"

#include <dlock/log.hpp>
#include <dlock/zk/error.hpp>
#include <dlock/zk/path.hpp>

#include "zk/recipe/retry.hpp"

#include "detail/op_base.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <optional>

namespace dlock::zk::detail {
namespace {

error_code check_arguments(const std::string& path, std::size_t max_leases) {
  if (auto ec = validate_path(path)) return ec;
  // Its lock and leases live at path + "/locks" and "/leases": the bound is theirs.
  if (path == "/" || path.size() + std::string_view("/leases").size() > max_path_size || max_leases == 0)
    return make_error_code(dlock::error::invalid_argument);
  return {};
}

bool is_held(const semaphore_core& core, const std::shared_ptr<held_lease>& lease) {
  return std::find(core.held.begin(), core.held.end(), lease) != core.held.end();
}

// --- the session, for the holder (as the locks watch it) ---

void on_session_change(const semaphore_core_ptr& core, error_code ec, session_state state) {
  core->monitoring = false;
  if (!core->held.empty())
    if (auto reason = session_loss(core->zk, ec, state, core->held.front()->node.owner, core->options.policy))
      core->lose(reason);
  if (!ec && !core->closed && state != session_state::closed && !core->held.empty())
    watch_session(core, on_session_change);
}

// --- each lease node, for the holder: deleted means lost ---

void watch_lease(const semaphore_core_ptr& core, const std::shared_ptr<held_lease>& lease);

void on_lease_event(std::weak_ptr<semaphore_core> weak_core, std::weak_ptr<held_lease> weak_lease, error_code ec,
                    watch_event event) {
  auto core = weak_core.lock();
  auto lease = weak_lease.lock();
  if (!core || !lease || !is_held(*core, lease)) return;  // released meanwhile
  if (!ec && event.type != watch_event_type::deleted) return watch_lease(core, lease);  // data set: watch again
  if (!ec) return core->lose(make_error_code(dlock::error::lost));
  if (ec == zk::error::session_expired || ec == dlock::error::closed) core->lose(ec);
  // operation_aborted: cancelled by a release; anything else is the session monitor's.
}

void on_lease_armed(std::weak_ptr<semaphore_core> weak_core, std::weak_ptr<held_lease> weak_lease, error_code ec,
                    std::optional<zk::stat> st) {
  auto core = weak_core.lock();
  auto lease = weak_lease.lock();
  if (!core || !lease || !is_held(*core, lease)) return;
  if (!ec && !st) return core->lose(make_error_code(dlock::error::lost));
  if (!ec) {
    lease->watch.wait(asio::bind_executor(core->strand, [weak_core, weak_lease](error_code e, watch_event ev) {
      on_lease_event(weak_core, weak_lease, e, std::move(ev));
    }));
    return;
  }
  if (is_retryable(ec)) {
    // Not armed: try again once the connection is back (the session monitor
    // tells the holder about the suspension if the policy says so).
    auto timer = std::make_shared<asio::steady_timer>(core->strand, std::chrono::milliseconds(200));
    timer->async_wait([timer, weak_core, weak_lease](error_code) {
      auto c = weak_core.lock();
      auto l = weak_lease.lock();
      if (c && l && is_held(*c, l)) watch_lease(c, l);
    });
    return;
  }
  if (ec == zk::error::session_expired || ec == dlock::error::closed) core->lose(ec);
}

void watch_lease(const semaphore_core_ptr& core, const std::shared_ptr<held_lease>& lease) {
  std::weak_ptr<semaphore_core> weak_core = core;
  std::weak_ptr<held_lease> weak_lease = lease;
  core->zk.exists(lease->node.path, lease->watch,
                  asio::bind_executor(core->strand, [weak_core, weak_lease](error_code ec, std::optional<zk::stat> st) {
                    on_lease_armed(weak_core, weak_lease, ec, st);
                  }));
}

// Waits for several removals, then completes once with the first error.
// (Optional and emplaced: any_completion_handler's move assignment is broken
// in Boost 1.81.)
struct removal_join {
  std::size_t pending = 0;
  error_code first;
  std::optional<asio::any_completion_handler<void(error_code)>> done;
  asio::any_io_executor strand;
};

}  // namespace

semaphore_core::semaphore_core(client& zk_client, std::string semaphore_path, std::size_t max,
                               semaphore_options opts)
    : zk(borrow_session(zk_client)),
      strand(zk_client.get_executor()),
      path(std::move(semaphore_path)),
      max_leases(max),
      options(std::move(opts)),
      argument_error(check_arguments(path, max)),
      loss(strand),
      observed(options.observer, zk_client.get_options().observer, path, dlock::lock_kind::zk_semaphore),
      stall(zk_client.get_options().stall) {
  if (options.identifier.empty()) options.identifier = default_identifier();
  lock_options removal_options;
  removal_options.retry = options.retry;
  removal = make_lock_core(zk, argument_error ? "/" : join_path(path, "leases"), lock_role::exclusive,
                           lock_flavor::sequential, removal_options);
}

void semaphore_core::on_acquired(const std::vector<lease_node>& nodes) {
  bool first = held.empty();
  lost_state = false;
  for (const auto& node : nodes) {
    auto lease = std::make_shared<held_lease>();
    lease->node = node;
    held.push_back(lease);
    watch_lease(shared_from_this(), lease);
  }
  count = held.size();
  ever_held = true;
  if (first) {
    loss.arm();
    if (observed) held_since = std::chrono::steady_clock::now();
    watch_stalls();
  }
  // A change the monitor could not see while we only acquired is judged now.
  auto owner = nodes.empty() ? std::nullopt : std::optional(nodes.front().owner);
  if (auto reason = session_loss(zk, {}, zk.state(), owner, options.policy)) return lose(reason);
  watch_session(shared_from_this(), on_session_change);
}

void semaphore_core::lose(error_code reason) {
  if (held.empty()) return;
  if (dlock::detail::log_enabled(log_level::warning))
    dlock::detail::log(log_level::warning, "zk semaphore: lost the leases of " + path + ": " + reason.message());
  for (auto& lease : held) {
    lease->watch.cancel();
    lost.push_back(lease->node);
  }
  held.clear();
  count = 0;
  lost_state = true;
  stall_watch.reset();
  observed.ended(held_since, hold_end::lost, reason);
  loss.fire(reason);
}

// As a lock's (lock_core.cpp): a stall too long for the session loses the set.
void semaphore_core::watch_stalls() {
  if (!stall || options.policy != loss_policy::standard) return;
  stall_watch = dlock::detail::suspend_on_stalls(stall, shared_from_this(),
                                                 [](const semaphore_core& core) { return !core.held.empty(); });
}

std::vector<lease_node> semaphore_core::take_last(std::size_t k) {
  std::vector<lease_node> out;
  bool was_held = !held.empty();
  while (k-- > 0 && !held.empty()) {
    held.back()->watch.cancel();
    out.push_back(held.back()->node);
    held.pop_back();
  }
  count = held.size();
  if (was_held && held.empty()) {
    stall_watch.reset();
    observed.ended(held_since, hold_end::released, {});
  }
  return out;
}

void semaphore_core::remove(std::vector<lease_node> nodes, error_code report,
                            asio::any_completion_handler<void(error_code)> done) {
  if (nodes.empty() || zk.state() == session_state::closed) {
    if (done) dlock::detail::post_completion(strand, std::move(done), report);
    return;
  }
  auto join = std::make_shared<removal_join>();
  join->pending = nodes.size();
  if (done) join->done.emplace(std::move(done));
  join->strand = strand;
  // Pipelined: one round trip for every lease.
  for (auto& node : nodes) {
    start_node_removal(removal, {std::move(node.path), node.czxid, node.owner}, report,
                       asio::bind_executor(strand, [join](error_code ec) {
                         if (ec && !join->first) join->first = ec;
                         if (--join->pending == 0 && join->done)
                           dlock::detail::dispatch_completion(join->strand, std::move(*join->done), join->first);
                       }));
  }
}

// --- the front end's functions ---

semaphore_core_ptr make_semaphore_core(client& zk, std::string path, std::size_t max_leases,
                                       semaphore_options options) {
  return std::make_shared<semaphore_core>(zk, std::move(path), max_leases, std::move(options));
}

void close_semaphore_core(const semaphore_core_ptr& core) noexcept {
  if (!core) return;
  try {
    asio::dispatch(core->strand, [core] {
      core->stop_monitor_and_acquire();
      auto nodes = core->take_last(core->held.size());
      nodes.insert(nodes.end(), core->lost.begin(), core->lost.end());
      core->lost.clear();
      core->remove(std::move(nodes), {}, {});
      core->loss.disarm();
    });
  } catch (...) {
    // Only allocation can fail here; the session's end removes the nodes anyway.
  }
}

void start_semaphore_acquire(const semaphore_core_ptr& core, semaphore_mode mode, std::size_t count,
                             std::chrono::steady_clock::duration limit, semaphore_handler handler) {
  auto op = make_semaphore_acquire(core, mode, count, std::move(handler));
  op->hook_cancellation();
  asio::dispatch(core->strand, [core, op, mode, count, limit] {
    op->starting(mode != semaphore_mode::try_once);
    error_code refusal = core->argument_error;
    if (!refusal && (count == 0 || count > core->max_leases)) refusal = dlock::error::invalid_argument;
    if (!refusal && mode == semaphore_mode::wait_for && limit <= std::chrono::steady_clock::duration::zero())
      refusal = dlock::error::invalid_argument;
    if (!refusal && (!dlock::detail::valid_stall_fraction(core->options.stall_fraction) ||
                     !valid_retry(core->options.retry) || core->options.identifier.size() > max_identifier_size))
      refusal = dlock::error::invalid_argument;
    if (!refusal && core->zk.state() == session_state::closed) refusal = dlock::error::closed;
    if (!refusal && core->current.lock()) refusal = dlock::error::in_progress;
    if (!refusal && count > core->max_leases - core->held.size()) refusal = dlock::error::already_held;  // no overflow
    if (refusal) return op->refuse(refusal);
    if (core->held.empty() && !core->lost.empty()) {
      // Leftovers of a lost hold (the session may have come back): delete them
      // first, or they would count against us. Sent before our creates.
      auto leftovers = std::exchange(core->lost, {});
      core->remove(std::move(leftovers), {}, {});
    }
    core->lost_state = false;
    core->current = op;
    op->begin(mode == semaphore_mode::wait_for ? limit : std::chrono::steady_clock::duration::zero());
  });
}

void start_semaphore_release(const semaphore_core_ptr& core, bool all, std::size_t count, semaphore_handler handler) {
  asio::dispatch(core->strand, [core, all, count, h = std::move(handler)]() mutable {
    if (!core->held.empty()) {
      if (!all && (count == 0 || count > core->held.size()))
        return dlock::detail::post_completion(core->strand, std::move(h), make_error_code(dlock::error::invalid_argument));
      auto nodes = core->take_last(all ? core->held.size() : count);
      if (core->held.empty()) core->loss.disarm();
      return core->remove(std::move(nodes), {}, std::move(h));
    }
    if (core->lost_state) {  // after a loss: the reason, and the leftovers deleted
      auto reason = core->loss.reason();
      if (!all) return dlock::detail::post_completion(core->strand, std::move(h), reason);
      core->lost_state = false;  // a second release is a no-op
      return core->remove(std::exchange(core->lost, {}), reason, std::move(h));
    }
    if (all && core->ever_held) return dlock::detail::post_completion(core->strand, std::move(h), error_code{});
    dlock::detail::post_completion(core->strand, std::move(h), make_error_code(dlock::error::not_held));
  });
}

asio::any_io_executor semaphore_executor(const semaphore_core& core) noexcept { return core.strand; }
std::size_t semaphore_leases(const semaphore_core& core) noexcept { return core.count.load(); }
const std::string& semaphore_path(const semaphore_core& core) noexcept { return core.path; }
lock_loss& semaphore_loss(semaphore_core& core) noexcept { return core.loss; }

}  // namespace dlock::zk::detail
