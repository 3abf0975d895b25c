// The semaphore acquire's Asio shell: executes the actions of its state
// machine (semaphore_recipe.hpp) on the client and feeds the replies back.
// No decision is taken here.
#include "semaphore_core.hpp"

#include <dlock/zk/error.hpp>
#include <dlock/zk/mutex.hpp>

#include "zk/recipe/grant_doubt.hpp"
#include "zk/recipe/node_names.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/error.hpp>

#include <optional>

namespace dlock::zk::detail {
namespace {

using action = semaphore_action;

const std::shared_ptr<dlock::observer>& silent_observer() {
  static const auto silent = std::make_shared<dlock::observer>();
  return silent;
}

class acquire_shell final : public acquire_op_base {
 public:
  acquire_shell(semaphore_core_ptr core, semaphore_mode mode, std::size_t count, semaphore_handler handler)
      : acquire_op_base(core->zk, core->strand, core->observed, std::move(handler)),
        core_(std::move(core)),
        waits_(mode != semaphore_mode::try_once),
        machine_({core_->path, count, core_->max_leases, waits_, core_->options.retry}, make_guid()) {}

  void cancel(error_code reason) override {
    if (completed() || !machine_.cancel(reason)) return;
    // Interrupt what we wait on; its completion then drives the cleanup.
    if (current_ == action::lock) mutex_stop_.emit(asio::cancellation_type::terminal);
    if (current_ == action::wait) watch_.cancel();
    if (current_ == action::backoff) interrupt_sleep();
  }

 private:
  void run() override { run(machine_.start()); }

  void run(action next) {
    current_ = next;
    // Failed while creates went unanswered: the caller hears it now, the
    // search for their nodes goes on in the background.
    if (machine_.hunting()) complete(machine_.result());
    switch (next) {
      case action::lock:
        return lock();
      case action::ensure:
        return ensure_path(machine_.leases_path());
      case action::create:
        count_attempt();
        return create();
      case action::recover:
        return list(false);
      case action::check_owners:
        return read_owners(machine_.targets(), false);
      case action::confirm:
        return read_owners(node_paths(), true);
      case action::list:
        return list(true);
      case action::wait:
        return wait_for_watch();
      case action::remove:
        watch_.cancel();
        core_->remove(machine_.nodes(), {}, on_strand([self = shared()](error_code) {
                        self->run(self->machine_.on_removed());
                      }));
        return;
      case action::unlock:
        watch_.cancel();  // Curator removes its watchers here too
        mutex_->release(on_strand([self = shared()](error_code) {
          auto state = self->core_->zk.state();
          bool connected = state == session_state::connected || state == session_state::reconnected;
          self->run(self->machine_.on_unlocked(connected));
        }));
        return;
      case action::backoff:
        return backoff();
      case action::done:
        return finish();
    }
  }

  // The `locks` mutex: a plain zk::mutex (Curator's InterProcessMutex layout).
  void lock() {
    if (!mutex_) {
      lock_options o;
      o.identifier = core_->options.identifier;
      o.policy = loss_policy::session;  // held for moments; its loss changes nothing (see the recipe)
      o.retry = core_->options.retry;
      // The semaphore's own part, not a lock of the user's: the observer hears
      // of the semaphore's acquire, not of this (an observer that does nothing).
      o.observer = silent_observer();
      mutex_.emplace(core_->zk, machine_.locks_path(), std::move(o));
    }
    auto done = asio::bind_cancellation_slot(mutex_stop_.slot(), on_strand([self = shared()](error_code ec) {
                                               self->run(self->machine_.on_locked({classify(ec), ec}));
                                             }));
    if (waits_) return mutex_->acquire(std::move(done));
    mutex_->try_acquire(std::move(done));
  }

  void path_ensured(reply r) override { run(machine_.on_ensured(r)); }
  void watch_fired(reply r) override { run(machine_.on_watch_fired(r)); }
  void slept() override { run(machine_.on_backoff_done()); }

  // The creates and the listing that judges them, pipelined: one session's
  // requests run in order, so the listing already holds our nodes.
  void create() {
    creates_.assign(machine_.to_create(), {});
    pending_ = creates_.size() + 1;
    for (std::size_t i = 0; i < creates_.size(); ++i) {
      core_->zk.create(machine_.create_path(), core_->options.identifier, create_mode::ephemeral_sequential,
                       on_strand([self = shared(), i](error_code ec, zk::created made) {
                         auto& c = self->creates_[i];
                         c.r = {classify(ec), ec};
                         if (!ec) c = {c.r, std::move(made.path), made.stat.czxid, made.stat.ephemeral_owner};
                         self->on_pipelined();
                       }));
    }
    core_->zk.get_children(machine_.leases_path(), watch_,
                           on_strand([self = shared()](error_code ec, std::vector<std::string> children,
                                                                 zk::stat) {
                             self->list_ec_ = ec;
                             self->children_ = std::move(children);
                             self->on_pipelined();
                           }));
  }

  void on_pipelined() {
    if (--pending_ != 0) return;
    auto children = std::exchange(children_, {});
    run(machine_.on_created(creates_, {classify(list_ec_), list_ec_}, children));
  }

  void list(bool with_watch) {
    if (machine_.needs_sync()) core_->zk.sync(machine_.leases_path(), on_strand([](error_code) {}));
    auto handler = on_strand([self = shared(), with_watch](error_code ec, std::vector<std::string> children,
                                                                     zk::stat) {
      reply r{classify(ec), ec};
      self->run(with_watch ? self->machine_.on_listed(r, children) : self->machine_.on_recovered(r, children));
    });
    if (with_watch) return core_->zk.get_children(machine_.leases_path(), watch_, std::move(handler));
    core_->zk.get_children(machine_.leases_path(), std::move(handler));
  }

  std::vector<std::string> node_paths() const {
    std::vector<std::string> paths;
    for (const auto& node : machine_.nodes()) paths.push_back(node.path);
    return paths;
  }

  // exists on every path, pipelined; the replies go back in that order, to
  // the recovery's owner check or to the grant's confirmation.
  void read_owners(const std::vector<std::string>& paths, bool confirming) {
    owners_.assign(paths.size(), {});
    pending_ = paths.size();
    for (std::size_t i = 0; i < paths.size(); ++i) {
      core_->zk.exists(paths[i], on_strand([self = shared(), i, confirming](error_code ec,
                                                                                      std::optional<zk::stat> st) {
                         if (!ec && !st) ec = zk::error::no_node;
                         self->owners_[i] = {{classify(ec), ec}, st ? st->ephemeral_owner : 0, st ? st->czxid : 0};
                         if (--self->pending_ != 0) return;
                         auto session = self->core_->zk.session_id();
                         self->run(confirming ? self->machine_.on_confirmed(self->owners_, session)
                                              : self->machine_.on_owners(self->owners_, session));
                       }));
    }
  }

  void backoff() {
    // Only cleanup is left after a cancel: the caller need not wait for a reconnection.
    if (machine_.cancelled() && machine_.winding()) complete(machine_.result());
    sleep(machine_.delay());
  }

  void finish() {
    auto ec = machine_.result();
    if (!ec && !completed()) {
      // Decided when the session can no longer vouch for the leases: not held.
      auto& nodes = machine_.nodes();
      auto owner = nodes.empty() ? std::nullopt : std::optional(nodes.front().owner);
      if (auto doubt = grant_doubt(core_->zk, owner)) {
        core_->remove(machine_.nodes(), {}, {});
        return complete(doubt);
      }
      core_->on_acquired(machine_.nodes());
    }
    complete(ec);
  }

  // The semaphore takes another acquire once this one is over.
  void settle(error_code) override {
    if (core_->current.lock().get() == this) core_->current.reset();
  }

  std::shared_ptr<acquire_shell> shared() { return std::static_pointer_cast<acquire_shell>(shared_from_this()); }

  semaphore_core_ptr core_;
  bool waits_;
  semaphore_machine machine_;
  std::optional<zk::mutex> mutex_;
  asio::cancellation_signal mutex_stop_;
  action current_ = action::done;
  std::size_t pending_ = 0;
  std::vector<created_lease> creates_;
  std::vector<owner_reply> owners_;
  std::vector<std::string> children_;
  error_code list_ec_;
};

}  // namespace

std::shared_ptr<acquire_op_base> make_semaphore_acquire(const semaphore_core_ptr& core, semaphore_mode mode,
                                                          std::size_t count, semaphore_handler handler) {
  return std::make_shared<acquire_shell>(core, mode, count, std::move(handler));
}

}  // namespace dlock::zk::detail
