// The one Asio shell of the ZooKeeper lock recipes: executes the actions of
// an acquire state machine (the sequential recipe's acquire_machine, or the
// simple lock's simple_acquire_machine) on the client and feeds the replies
// back. No decision is taken here.
#include "lock_core.hpp"

#include <dlock/log.hpp>
#include <dlock/zk/error.hpp>

#include "simple_lock_recipe.hpp"
#include "zk/recipe/grant_doubt.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/error.hpp>

#include <memory>
#include <optional>
#include <utility>
#include <variant>

namespace dlock::zk::detail {
namespace {

using action = acquire_action;

class acquire_shell final : public acquire_op_base {
 public:
  acquire_shell(lock_core_ptr core, acquire_mode mode, asio::any_completion_handler<void(error_code)> handler)
      : acquire_op_base(core->zk, core->strand, core->observed, std::move(handler)),
        core_(std::move(core)),
        waits_(mode != acquire_mode::try_once),
        storage_(make_machine()),
        machine_(machine_in(storage_)) {}

  void cancel(error_code reason) override {
    if (completed()) return;
    if (awaiting_session_) {
      cancel_reason_ = reason;
      return session_wait_stop_.emit(asio::cancellation_type::terminal);
    }
    if (!machine_->cancel(reason)) return;
    // Interrupt what we wait on; its completion then drives the cleanup.
    if (current_ == action::wait) watch_.cancel();
    if (current_ == action::backoff) interrupt_sleep();
  }

 private:
  // Held in place (no allocation per acquire), driven through its interface.
  using machines = std::variant<acquire_machine, simple_acquire_machine>;

  machines make_machine() const {
    if (core_->flavor == lock_flavor::simple)
      return simple_acquire_machine({core_->path, waits_, core_->options.retry});
    return acquire_machine({core_->role, core_->path, waits_, core_->options.retry}, make_guid());
  }

  static acquire_steps* machine_in(machines& m) {
    return std::visit([](auto& machine) -> acquire_steps* { return &machine; }, m);
  }

  void run() override {
    attempt_session_ = core_->zk.session_id();
    run(machine_->start());
  }

  void run(action next) {
    // A watch armed with the owner's read is kept only to be waited on.
    if (current_ == action::watch_owner && next != action::wait) watch_.cancel();
    current_ = next;
    // Failed while a create's outcome was unknown: the caller hears it now,
    // the search for that node goes on in the background.
    if (machine_->hunting()) complete(machine_->result());
    if (!completed()) core_->own_path = machine_->own_path();  // visible as node_path() while acquiring
    switch (next) {
      case action::ensure_path:
        return ensure_path(machine_->path_to_ensure());
      case action::create_and_list:
        count_attempt();
        return create_and_list();
      case action::create:
        count_attempt();
        return create(create_mode::ephemeral, [self = shared()] { self->on_created({}, {}); });
      case action::list:
        return list();
      case action::check_owner:
      case action::watch_owner:
        return read_owner(next == action::watch_owner);
      case action::watch:
        return watch();
      case action::wait:
        return wait_for_watch();
      case action::remove:
        return remove();
      case action::remove_owned:
        return remove_owned();
      case action::backoff:
        return backoff();
      case action::done:
        return finish();
    }
  }

  // A read right after a create whose reply was lost follows a sync (its
  // error, if any, repeats in the read).
  void sync_if_needed() {
    if (machine_->needs_sync()) core_->zk.sync(machine_->lock_path(), on_strand([](error_code) {}));
  }

  void path_ensured(reply r) override { run(machine_->on_ensured(r)); }
  void watch_fired(reply r) override { run(machine_->on_watch_fired(r)); }
  void slept() override { run(machine_->on_backoff_done()); }

  // Our node, with the lock's identifier as data; `then` runs once its reply is in.
  template <class Then>
  void create(create_mode mode, Then then) {
    core_->zk.create(machine_->create_path(), core_->options.identifier, mode,
                     on_strand([self = shared(), then](error_code ec, zk::created made) {
                       self->create_ec_ = ec;
                       self->created_ = std::move(made);
                       then();
                     }));
  }

  // The listing is sent right behind the create: one session's requests run
  // in order, so it already holds our node. One round trip when uncontended.
  void create_and_list() {
    pending_ = 2;
    create(create_mode::ephemeral_sequential, [self = shared()] { self->on_pipelined(); });
    core_->zk.get_children(machine_->lock_path(),
                           on_strand([self = shared()](error_code ec, std::vector<std::string> children, zk::stat) {
                             self->list_ec_ = ec;
                             self->children_ = std::move(children);
                             self->on_pipelined();
                           }));
  }

  void on_pipelined() {
    if (--pending_ != 0) return;
    on_created({classify(list_ec_), list_ec_}, std::exchange(children_, {}));
  }

  // Not kept while waiting: a listing can hold thousands of names.
  void on_created(reply list, std::vector<std::string> children) {
    auto created = std::exchange(created_, {});
    if (!create_ec_) owner_ = created.stat.ephemeral_owner;
    run(machine_->on_created({classify(create_ec_), create_ec_}, created.path, created.stat.czxid, list, children));
  }

  void list() {
    sync_if_needed();
    core_->zk.get_children(machine_->lock_path(),
                           on_strand([self = shared()](error_code ec, std::vector<std::string> children, zk::stat) {
                             self->run(self->machine_->on_listed({classify(ec), ec}, children));
                           }));
  }

  void read_owner(bool with_watch) {
    sync_if_needed();
    auto handler = on_strand([self = shared()](error_code ec, std::optional<zk::stat> st) {
      if (!ec && !st) ec = zk::error::no_node;
      auto owner = st ? st->ephemeral_owner : 0;
      if (st) self->owner_ = owner;
      self->run(self->machine_->on_owner({classify(ec), ec}, owner, st ? st->czxid : 0,
                                         self->core_->zk.session_id()));
    });
    if (with_watch) return core_->zk.exists(machine_->target_path(), watch_, std::move(handler));
    core_->zk.exists(machine_->target_path(), std::move(handler));
  }

  // `get` with a watch registers nothing when the node is already gone.
  void watch() {
    core_->zk.get(machine_->target_path(), watch_, on_strand([self = shared()](error_code ec, std::string, zk::stat) {
                    self->run(self->machine_->on_watch_set({classify(ec), ec}));
                  }));
  }

  void remove() {
    watch_.cancel();  // a watch armed before a cancel is not wanted any more
    core_->zk.remove(machine_->target_path(), -1, on_strand([self = shared()](error_code ec) {
                       self->run(self->machine_->on_removed({classify(ec), ec}));
                     }));
  }

  void remove_owned() {
    watch_.cancel();
    start_node_removal(core_, {machine_->target_path(), machine_->fencing_token(), owner_}, {},
                       on_strand([self = shared()](error_code ec) {
                         self->run(self->machine_->on_removed({classify(ec), ec}));
                       }));
  }

  void backoff() {
    // Only the cleanup of our node is left: the caller need not wait for
    // a reconnection; the cleanup goes on in the background.
    if (machine_->cleaning() && machine_->cancelled()) complete(machine_->result());
    sleep(machine_->delay());
  }

  // A failed acquire leaves the lock idle (a success made it held already).
  void settle(error_code ec) override {
    if (ec && core_->state == lock_core::hold::acquiring) {  // (or early: only a cleanup goes on)
      core_->state = lock_core::hold::idle;
      core_->own_path.clear();
    }
  }

  std::int64_t reported_token() const noexcept override { return core_->czxid.load(); }

  void finish() {
    auto ec = machine_->result();
    if (ec && restarts_after(ec)) return await_new_session(ec);
    if (!ec && !completed()) {
      // Decided when the session can no longer vouch for our node (the
      // client paused past the session timeout, say): not a hold. A grant
      // while merely suspended is a hold, lost at once under the standard
      // policy (lock_core::on_acquired): the session may well live on.
      if (auto doubt = grant_doubt(core_->zk, owner_)) return give_back(doubt);
      core_->on_acquired(machine_->own_path(), machine_->fencing_token(), owner_);
    }
    complete(ec);
  }

  // Our node, if it still exists, goes in the background (ownership checked).
  void give_back(error_code why) {
    start_node_removal(core_, {machine_->own_path(), machine_->fencing_token(), owner_}, {}, {});
    complete(why);
  }

  // lock_options::restart_after_expiry (not for the simple lock): the
  // session ended while we waited. Nothing was held, and the expiry took our
  // node, so starting again on the next session leaves nothing behind.
  bool restarts_after(error_code ec) const {
    if (core_->flavor != lock_flavor::sequential) return false;
    if (!core_->options.restart_after_expiry || !waits_ || completed() || machine_->cancelled()) return false;
    if (classify(ec) == step_result::session_lost) return true;
    // Our node missing from a listing made on a newer session: the same
    // expiry, seen after the client had already reopened.
    return ec == dlock::error::lost && core_->zk.session_id() != attempt_session_;
  }

  // connect() waits through the client's reopening of the session, and fails
  // at once when none will come (reopen_on_expiry off, closed, auth failed).
  void await_new_session(error_code expiry) {
    awaiting_session_ = true;
    expiry_ = expiry;
    core_->zk.connect(asio::bind_cancellation_slot(
        session_wait_stop_.slot(), on_strand([self = shared()](error_code ec) { self->on_session(ec); })));
  }

  void on_session(error_code ec) {
    awaiting_session_ = false;
    if (cancel_reason_) return complete(cancel_reason_);
    if (ec == dlock::error::timed_out) return await_new_session(expiry_);  // still reconnecting
    if (ec) return complete(ec);
    // The same session back: it was not an expiry after all, and our node may live on.
    if (core_->zk.session_id() == attempt_session_) return complete(expiry_);
    if (dlock::detail::log_enabled(log_level::info))
      dlock::detail::log(log_level::info, "zk lock: the session expired while waiting for " + core_->path +
                                              ": queueing again on the new session");
    storage_ = make_machine();
    machine_ = machine_in(storage_);
    run();
  }

  std::shared_ptr<acquire_shell> shared() { return std::static_pointer_cast<acquire_shell>(shared_from_this()); }

  lock_core_ptr core_;
  bool waits_;  // not try_acquire
  machines storage_;
  acquire_steps* machine_;  // the one in storage_
  std::int64_t attempt_session_ = 0;  // the session this attempt started on
  bool awaiting_session_ = false;
  asio::cancellation_signal session_wait_stop_;
  error_code expiry_, cancel_reason_;
  action current_ = action::done;
  std::size_t pending_ = 0;
  error_code create_ec_, list_ec_;
  std::int64_t owner_ = 0;  // the session that created our node
  zk::created created_;
  std::vector<std::string> children_;
};

}  // namespace

std::shared_ptr<acquire_op_base> make_acquire(const lock_core_ptr& core, acquire_mode mode,
                                              asio::any_completion_handler<void(error_code)> handler) {
  return std::make_shared<acquire_shell>(core, mode, std::move(handler));
}

}  // namespace dlock::zk::detail
