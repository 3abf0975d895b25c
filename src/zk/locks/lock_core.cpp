// The lock object's life: acquire dispatch, release, loss tracking, participants.
#include "lock_core.hpp"

#include <dlock/log.hpp>
#include <dlock/zk/error.hpp>
#include <dlock/zk/path.hpp>

#include "zk/recipe/retry.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>

namespace dlock::zk::detail {
namespace {

using dlock::detail::completion;

dlock::lock_kind kind_of(lock_role role, lock_flavor flavor) noexcept {
  if (flavor == lock_flavor::simple) return dlock::lock_kind::zk_simple_lock;
  switch (role) {
    case lock_role::reader: return dlock::lock_kind::zk_read_lock;
    case lock_role::writer: return dlock::lock_kind::zk_write_lock;
    case lock_role::exclusive: break;
  }
  return dlock::lock_kind::zk_mutex;
}

error_code check_path(const std::string& path) {
  if (auto ec = validate_path(path)) return ec;
  if (path == "/") return make_error_code(dlock::error::invalid_argument);  // every node would contend
  if (path.size() > max_path_size) return make_error_code(dlock::error::invalid_argument);
  return {};
}

// --- watching the session for the holder ---

void on_session_change(const lock_core_ptr& core, error_code ec, session_state state) {
  core->monitoring = false;
  if (core->state == lock_core::hold::held)
    if (auto reason = session_loss(core->zk, ec, state, core->session, core->options.policy)) core->lose(reason);
  if (!ec && !core->closed && state != session_state::closed) watch_session(core, on_session_change);
}

// --- participants ---

class participants_op : public std::enable_shared_from_this<participants_op> {
 public:
  using handler_type = asio::any_completion_handler<void(error_code, std::vector<std::string>)>;
  participants_op(lock_core_ptr core, handler_type handler) : core_(std::move(core)), op_(std::move(handler)) {}

  void start() {
    core_->zk.get_children(core_->path, asio::bind_executor(core_->strand, [self = shared_from_this()](
                                                                             error_code ec, std::vector<std::string> c,
                                                                             zk::stat) {
                             self->on_listed(ec, std::move(c));
                           }));
  }

 private:
  void on_listed(error_code ec, std::vector<std::string> children) {
    if (ec == zk::error::no_node) return finish({});
    if (ec) return finish(ec);
    children_ = std::move(children);
    auto sorted = sort_contenders(children_);
    if (sorted.empty()) return finish({});
    data_.resize(sorted.size());
    present_.assign(sorted.size(), false);
    pending_ = sorted.size();
    // One round trip: the reads are pipelined, and replies keep queue order.
    for (std::size_t i = 0; i < sorted.size(); ++i) {
      core_->zk.get(core_->path + "/" + std::string(sorted[i].name),
                    asio::bind_executor(core_->strand, [self = shared_from_this(), i](error_code e, std::string d,
                                                                                     zk::stat) {
                      self->on_data(i, e, std::move(d));
                    }));
    }
  }

  void on_data(std::size_t index, error_code ec, std::string data) {
    if (!ec) {
      data_[index] = std::move(data);
      present_[index] = true;
    } else if (ec != zk::error::no_node && !error_) {
      error_ = ec;  // a node that left meanwhile is simply not listed
    }
    if (--pending_ == 0) finish(error_);
  }

  void finish(error_code ec) {
    std::vector<std::string> out;
    if (!ec)
      for (std::size_t i = 0; i < data_.size(); ++i)
        if (present_[i]) out.push_back(std::move(data_[i]));
    op_.complete(completion::dispatch, core_->strand, ec, std::move(out));
  }

  lock_core_ptr core_;
  dlock::detail::op_base<void(error_code, std::vector<std::string>)> op_;
  std::vector<std::string> children_;
  std::vector<std::string> data_;
  std::vector<bool> present_;
  std::size_t pending_ = 0;
  error_code error_;
};

}  // namespace

lock_core::lock_core(client& zk_client, std::string lock_path, lock_role lock_role_, lock_flavor lock_flavor_,
                     lock_options lock_opts)
    : zk(borrow_session(zk_client)),
      strand(zk_client.get_executor()),
      path(std::move(lock_path)),
      role(lock_role_),
      flavor(lock_flavor_),
      options(std::move(lock_opts)),
      path_error(check_path(path)),
      loss(strand),
      observed(options.observer, zk_client.get_options().observer, path, kind_of(role, flavor)),
      stall(zk_client.get_options().stall) {
  if (options.identifier.empty()) options.identifier = default_identifier();
}

void lock_core::on_acquired(std::string node, std::int64_t zxid, std::int64_t owner) {
  own_path = std::move(node);
  czxid = zxid;
  session = owner;
  state = hold::held;
  if (observed) held_since = std::chrono::steady_clock::now();
  loss.arm();
  // The session may have changed state between the last reply and now: a
  // change the monitor saw while we were only acquiring is judged again here.
  if (auto reason = session_loss(zk, {}, zk.state(), session, options.policy)) lose(reason);
  watch_session(shared_from_this(), on_session_change);
  if (state == hold::held) subscribe_to_stalls();
}

void lock_core::lose(error_code reason) {
  state = hold::lost;
  stall_watch.reset();
  observed.ended(held_since, hold_end::lost, reason);
  if (dlock::detail::log_enabled(log_level::warning))
    dlock::detail::log(log_level::warning, "zk lock: lost " + own_path + ": " + reason.message());
  loss.fire(reason);
}

void lock_core::released_while_held() {
  stall_watch.reset();
  observed.ended(held_since, hold_end::released, {});
}

// A stall is judged against the session timeout: the servers may have
// expired the session while nobody looked (the client pings after a third of
// it, so they last heard from us up to that long before the stall began).
void lock_core::subscribe_to_stalls() {
  if (!stall || options.policy != loss_policy::standard) return;
  stall_watch = dlock::detail::suspend_on_stalls(stall, shared_from_this(),
                                                 [](const lock_core& core) { return core.state == hold::held; });
}

owned_node lock_core::take_own_node() {
  owned_node node{std::move(own_path), czxid.load(), session};
  own_path.clear();
  czxid = 0;
  return node;
}

lock_core_ptr make_lock_core(client& zk, std::string path, lock_role role, lock_flavor flavor,
                             lock_options options) {
  return std::make_shared<lock_core>(zk, std::move(path), role, flavor, std::move(options));
}

void close_lock_core(const lock_core_ptr& core) noexcept {
  if (!core) return;
  try {
    asio::dispatch(core->strand, [core] {
      core->stop_monitor_and_acquire();
      if (core->state == lock_core::hold::held) core->released_while_held();
      core->stall_watch.reset();
      if ((core->state == lock_core::hold::held || core->state == lock_core::hold::lost) &&
          !core->own_path.empty() && core->zk.state() != session_state::closed)
        start_node_removal(core, core->take_own_node(), {}, {});
      core->state = lock_core::hold::released;
      core->loss.disarm();
    });
  } catch (...) {
    // Only allocation can fail here; the session's end removes the node anyway.
  }
}

void start_acquire(const lock_core_ptr& core, acquire_mode mode, std::chrono::steady_clock::duration limit,
                   asio::any_completion_handler<void(error_code)> handler, std::string identifier) {
  auto op = make_acquire(core, mode, std::move(handler));
  op->hook_cancellation();
  asio::dispatch(core->strand, [core, op, mode, limit, identifier = std::move(identifier)]() mutable {
    op->starting(mode != acquire_mode::try_once);
    error_code refusal = core->path_error;
    if (!refusal && core->zk.state() == session_state::closed) refusal = dlock::error::closed;
    if (!refusal && core->state == lock_core::hold::held) refusal = dlock::error::already_held;
    if (!refusal && core->state == lock_core::hold::acquiring) refusal = dlock::error::in_progress;
    if (!refusal && mode == acquire_mode::wait_for && limit <= std::chrono::steady_clock::duration::zero())
      refusal = dlock::error::invalid_argument;
    if (!refusal && !dlock::detail::valid_stall_fraction(core->options.stall_fraction))
      refusal = dlock::error::invalid_argument;
    if (!refusal && !valid_retry(core->options.retry)) refusal = dlock::error::invalid_argument;
    if (!refusal && std::max(identifier.size(), core->options.identifier.size()) > max_identifier_size)
      refusal = dlock::error::invalid_argument;
    if (refusal) return op->refuse(refusal);
    if (!identifier.empty()) core->options.identifier = std::move(identifier);
    if (core->state == lock_core::hold::lost && !core->own_path.empty()) {
      // A hold lost to a suspension may have left our node (the session came
      // back): delete it first, or we would queue behind ourselves. One
      // session's requests run in order, so this goes before our create.
      start_node_removal(core, core->take_own_node(), {}, {});
    }
    core->own_path.clear();
    core->czxid = 0;
    core->state = lock_core::hold::acquiring;
    core->current = op;
    op->begin(mode == acquire_mode::wait_for ? limit : std::chrono::steady_clock::duration::zero());
  });
}

void start_release(const lock_core_ptr& core, asio::any_completion_handler<void(error_code)> handler) {
  asio::dispatch(core->strand, [core, h = std::move(handler)]() mutable {
    switch (core->state) {
      case lock_core::hold::held: {
        core->state = lock_core::hold::released;
        core->released_while_held();
        core->loss.disarm();
        return start_node_removal(core, core->take_own_node(), {}, std::move(h));
      }
      case lock_core::hold::lost: {
        core->state = lock_core::hold::released;
        auto reason = core->loss.reason();
        auto node = core->take_own_node();
        if (node.path.empty() || core->zk.state() == session_state::closed)
          return dlock::detail::post_completion(core->strand, std::move(h), reason);
        return start_node_removal(core, std::move(node), reason, std::move(h));
      }
      case lock_core::hold::released:
        return dlock::detail::post_completion(core->strand, std::move(h), error_code{});
      default:
        return dlock::detail::post_completion(core->strand, std::move(h), make_error_code(dlock::error::not_held));
    }
  });
}

void start_participants(const lock_core_ptr& core,
                        asio::any_completion_handler<void(error_code, std::vector<std::string>)> handler) {
  asio::dispatch(core->strand, [core, h = std::move(handler)]() mutable {
    if (core->path_error) return dlock::detail::post_completion(core->strand, std::move(h), core->path_error, std::vector<std::string>{});
    std::make_shared<participants_op>(core, std::move(h))->start();
  });
}

asio::any_io_executor core_executor(const lock_core& core) noexcept { return core.strand; }
bool core_held(const lock_core& core) noexcept { return core.state == lock_core::hold::held; }
std::int64_t core_fencing_token(const lock_core& core) noexcept {
  return core.state == lock_core::hold::held ? core.czxid.load() : 0;
}
std::string core_node_path(const lock_core& core) { return core.own_path; }
const std::string& core_path(const lock_core& core) noexcept { return core.path; }
lock_loss& core_loss(lock_core& core) noexcept { return core.loss; }

}  // namespace dlock::zk::detail
