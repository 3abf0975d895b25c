// The Asio shell of the recipe: executes acquire_machine's actions on the
// client and feeds the replies back. No decision is taken here.
#include "lock_core.hpp"

#include <dlock/log.hpp>
#include <dlock/zk/error.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/steady_timer.hpp>

#include <optional>

namespace dlock::zk::detail {
namespace {

using action = acquire_machine::action;

class sequential_acquire_op final : public acquire_op_base {
 public:
  sequential_acquire_op(lock_core_ptr core, acquire_mode mode, asio::any_completion_handler<void(error_code)> handler)
      : acquire_op_base(std::move(core), std::move(handler)),
        waits_(mode != acquire_mode::try_once),
        machine_(machine_settings(), make_guid()) {}

  void cancel(error_code reason) override {
    if (completed()) return;
    if (awaiting_session_) {
      cancel_reason_ = reason;
      return session_wait_stop_.emit(asio::cancellation_type::terminal);
    }
    if (!machine_.cancel(reason)) return;
    // Interrupt what we wait on; its completion then drives the cleanup.
    if (current_ == action::wait) watch_.cancel();
    if (current_ == action::backoff && timer_) timer_->cancel();
  }

 private:
  template <class F>
  asio::executor_binder<std::decay_t<F>, asio::any_io_executor> on_strand(F&& f) {
    return asio::bind_executor(core_->strand, std::forward<F>(f));
  }

  acquire_machine::settings machine_settings() const {
    return {core_->role, core_->path, waits_, core_->options.retry};
  }

  void run() override {
    attempt_session_ = core_->zk.session_id();
    run(machine_.start());
  }

  void run(action next) {
    current_ = next;
    // Failed while a create's outcome was unknown: the caller hears it now,
    // the search for that node goes on in the background.
    if (machine_.hunting()) complete(machine_.result());
    if (!completed()) core_->own_path = machine_.own_path();  // visible as node_path() while acquiring
    auto& zk = core_->zk;
    auto self = shared();
    switch (next) {
      case action::ensure_path:
        return ensure_path();
      case action::create_and_list:
        return create_and_list();
      case action::list:
        if (machine_.recovering())  // its error, if any, repeats in the listing
          zk.sync(machine_.lock_path(), on_strand([](error_code) {}));
        zk.get_children(machine_.lock_path(),
                        on_strand([self](error_code ec, std::vector<std::string> children, zk::stat) {
                          self->run(self->machine_.on_listed({classify(ec), ec}, children));
                        }));
        return;
      case action::check_owner:
        zk.exists(machine_.target_path(), on_strand([self](error_code ec, std::optional<zk::stat> st) {
                    if (!ec && !st) ec = zk::error::no_node;
                    auto owner = st ? st->ephemeral_owner : 0;
                    auto czxid = st ? st->czxid : 0;
                    self->owner_ = owner;
                    self->run(self->machine_.on_owner({classify(ec), ec}, owner, czxid, self->core_->zk.session_id()));
                  }));
        return;
      case action::watch:
        // `get` with a watch registers nothing when the node is already gone.
        zk.get(machine_.target_path(), watch_, on_strand([self](error_code ec, std::string, zk::stat) {
                 self->run(self->machine_.on_watch_set({classify(ec), ec}));
               }));
        return;
      case action::wait:
        watch_.wait(on_strand([self](error_code ec, watch_event) {
          self->run(self->machine_.on_watch_fired({classify(ec), ec}));
        }));
        return;
      case action::remove:
        watch_.cancel();  // a watch armed before a cancel is not wanted any more
        zk.remove(machine_.target_path(), -1, on_strand([self](error_code ec) {
                    self->run(self->machine_.on_removed({classify(ec), ec}));
                  }));
        return;
      case action::backoff:
        // Only the cleanup of our node is left: the caller need not wait for
        // a reconnection; the cleanup goes on in the background.
        if (machine_.cleaning() && machine_.cancelled()) complete(machine_.result());
        if (!timer_) timer_.emplace(core_->strand);
        timer_->expires_after(machine_.delay());
        timer_->async_wait(on_strand([self](error_code) { self->run(self->machine_.on_backoff_done()); }));
        return;
      case action::done:
        return finish();
    }
  }

  // Create every missing ancestor as a container, pipelined: replies come in
  // order, so the last one says whether the lock path exists now.
  void ensure_path() {
    auto prefixes = path_prefixes(machine_.lock_path());
    pending_ = prefixes.size();
    ensure_error_ = {};
    for (auto& prefix : prefixes) {
      core_->zk.create(std::move(prefix), {}, create_mode::container,
                       on_strand([self = shared()](error_code ec, zk::created) {
                         if (ec && ec != zk::error::node_exists && !self->ensure_error_) self->ensure_error_ = ec;
                         if (--self->pending_ == 0)
                           self->run(self->machine_.on_ensured({classify(self->ensure_error_), self->ensure_error_}));
                       }));
    }
  }

  // The listing is sent right behind the create: one session's requests run
  // in order, so it already holds our node. One round trip when uncontended.
  void create_and_list() {
    pending_ = 2;
    auto self = shared();
    core_->zk.create(machine_.create_path(), core_->options.identifier, create_mode::ephemeral_sequential,
                     on_strand([self](error_code ec, zk::created made) {
                       self->create_ec_ = ec;
                       self->created_ = std::move(made);
                       self->on_pipelined();
                     }));
    core_->zk.get_children(machine_.lock_path(),
                           on_strand([self](error_code ec, std::vector<std::string> children, zk::stat) {
                             self->list_ec_ = ec;
                             self->children_ = std::move(children);
                             self->on_pipelined();
                           }));
  }

  void on_pipelined() {
    if (--pending_ != 0) return;
    // Not kept while waiting: a listing can hold thousands of names.
    auto children = std::move(children_);
    children_ = {};
    auto created = std::move(created_);
    created_ = {};
    if (!create_ec_) owner_ = created.stat.ephemeral_owner;
    run(machine_.on_created({classify(create_ec_), create_ec_}, created.path, created.stat.czxid,
                            {classify(list_ec_), list_ec_}, children));
  }

  void finish() {
    auto ec = machine_.result();
    if (ec && restarts_after(ec)) return await_new_session(ec);
    if (!ec && !completed()) core_->on_acquired(machine_.own_path(), machine_.fencing_token(), owner_);
    complete(ec);
  }

  // lock_options::restart_after_expiry: the session ended while we waited.
  // Nothing was held, and the expiry took our node, so starting again on the
  // next session leaves nothing behind.
  bool restarts_after(error_code ec) const {
    if (!core_->options.restart_after_expiry || !waits_ || completed() || machine_.cancelled()) return false;
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
    machine_ = acquire_machine(machine_settings(), make_guid());
    run();
  }

  std::shared_ptr<sequential_acquire_op> shared() {
    return std::static_pointer_cast<sequential_acquire_op>(shared_from_this());
  }

  bool waits_;  // not try_acquire
  acquire_machine machine_;
  std::int64_t attempt_session_ = 0;  // the session this attempt started on
  bool awaiting_session_ = false;
  asio::cancellation_signal session_wait_stop_;
  error_code expiry_, cancel_reason_;
  zk::watch watch_;
  std::optional<asio::steady_timer> timer_;
  action current_ = action::done;
  std::size_t pending_ = 0;
  error_code create_ec_, list_ec_, ensure_error_;
  std::int64_t owner_ = 0;  // the session that created our node
  zk::created created_;
  std::vector<std::string> children_;
};

}  // namespace

std::shared_ptr<acquire_op_base> make_sequential_acquire(const lock_core_ptr& core, acquire_mode mode,
                                                         asio::any_completion_handler<void(error_code)> handler) {
  return std::make_shared<sequential_acquire_op>(core, mode, std::move(handler));
}

}  // namespace dlock::zk::detail
