// The simple lock: one ephemeral node at the lock path. Taken means
// NODEEXISTS: watch the node and try again when it goes. Every waiter wakes
// on each release (the herd effect) and the fastest wins (not fair).
#include "lock_core.hpp"

#include <dlock/zk/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/asio/steady_timer.hpp>

#include <optional>

namespace dlock::zk::detail {
namespace {

class simple_acquire_op final : public acquire_op_base {
 public:
  simple_acquire_op(lock_core_ptr core, acquire_mode mode, asio::any_completion_handler<void(error_code)> handler)
      : acquire_op_base(std::move(core), std::move(handler)), wait_(mode != acquire_mode::try_once) {}

  void cancel(error_code reason) override {
    if (completed() || cancelled_) return;
    cancelled_ = true;
    reason_ = reason;
    if (phase_ == phase::waiting) watch_.cancel();
    if (phase_ == phase::backing_off && timer_) timer_->cancel();
  }

 private:
  enum class phase { creating, checking, waiting, ensuring, backing_off, removing };

  template <class F>
  asio::executor_binder<std::decay_t<F>, asio::any_io_executor> on_strand(F&& f) {
    return asio::bind_executor(core_->strand, std::forward<F>(f));
  }

  void run() override { create(); }

  void create() {
    if (cancelled_) return complete(reason_);
    phase_ = phase::creating;
    core_->zk.create(core_->path, core_->options.identifier, create_mode::ephemeral,
                     on_strand([self = shared()](error_code ec, zk::created made) {
                       self->on_created(ec, made.stat);
                     }));
  }

  void on_created(error_code ec, const zk::stat& made) {
    switch (classify(ec)) {
      case step_result::ok:
        if (cancelled_) return remove_ours(made, reason_);
        return acquired(made);
      case step_result::node_exists:
        return check();
      case step_result::no_node:
        return ensure_parents();
      case step_result::connection_loss:
        create_unknown_ = true;  // our node may exist: check() finds it by its owner
        return backoff(ec, [](simple_acquire_op& op) { op.check(); });
      default:
        return complete(ec);
    }
  }

  // Who holds it? Arms a watch on the node at the same time.
  void check() {
    phase_ = phase::checking;
    // After a lost create reply, a member we reconnected to must catch up
    // first, or it could answer before our create committed.
    if (create_unknown_) core_->zk.sync(core_->path, on_strand([](error_code) {}));  // its error repeats below
    core_->zk.exists(core_->path, watch_, on_strand([self = shared()](error_code ec, std::optional<zk::stat> st) {
                       self->on_checked(ec, st);
                     }));
  }

  void on_checked(error_code ec, const std::optional<zk::stat>& st) {
    if (hunting_) return on_hunted(ec, st);
    auto result = classify(ec);
    if (result == step_result::connection_loss) return backoff(ec, [](simple_acquire_op& op) { op.check(); });
    if (result != step_result::ok) return complete(ec);
    if (!st) {
      watch_.cancel();
      create_unknown_ = false;
      return create();
    }
    if (create_unknown_ && st->ephemeral_owner == core_->zk.session_id()) {
      watch_.cancel();
      create_unknown_ = false;  // our lost create did happen
      if (cancelled_) return remove_ours(*st, reason_);
      return acquired(*st);
    }
    create_unknown_ = false;
    if (cancelled_) return complete(reason_);
    if (!wait_) return complete(make_error_code(dlock::error::taken));
    phase_ = phase::waiting;
    watch_.wait(on_strand([self = shared()](error_code wec, watch_event) { self->on_fired(wec); }));
  }

  void on_fired(error_code ec) {
    switch (classify(ec)) {
      case step_result::ok:
        return create();
      case step_result::aborted:
        return complete(cancelled_ ? reason_ : ec);
      case step_result::connection_loss:
        return check();
      default:
        return complete(ec);
    }
  }

  void ensure_parents() {
    if (cancelled_) return complete(reason_);
    if (++attempts_ > core_->options.retry.max_attempts) return complete(make_error_code(zk::error::no_node));
    auto slash = core_->path.rfind('/');
    auto prefixes = path_prefixes(core_->path.substr(0, slash));
    phase_ = phase::ensuring;
    pending_ = prefixes.size();
    ensure_error_ = {};
    for (auto& prefix : prefixes) {
      core_->zk.create(std::move(prefix), {}, create_mode::container,
                       on_strand([self = shared()](error_code ec, zk::created) {
                         if (ec && ec != zk::error::node_exists && !self->ensure_error_) self->ensure_error_ = ec;
                         if (--self->pending_ != 0) return;
                         auto r = classify(self->ensure_error_);
                         if (r == step_result::ok || r == step_result::no_node || r == step_result::connection_loss)
                           return self->create();
                         self->complete(self->ensure_error_);
                       }));
    }
  }

  template <class Next>
  void backoff(error_code ec, Next next) {
    if (++attempts_ > core_->options.retry.max_attempts && !hunting_) {
      if (!create_unknown_) return complete(ec);
      // Our create may have been applied, and the node would block the lock
      // (us included) while the session lives: fail now, and look for it in
      // the background until found and deleted, absent, or the session ends.
      hunting_ = true;
      complete(ec);
    }
    phase_ = phase::backing_off;
    if (!timer_) timer_.emplace(core_->strand);
    auto delay = core_->options.retry.initial_backoff * (1 << std::min(attempts_ - 1, 16));
    timer_->expires_after(std::min<std::chrono::steady_clock::duration>(delay, core_->options.retry.max_backoff));
    timer_->async_wait(on_strand([self = shared(), next](error_code) { next(*self); }));
  }

  void on_hunted(error_code ec, const std::optional<zk::stat>& st) {
    watch_.cancel();
    auto result = classify(ec);
    if (result == step_result::connection_loss) return backoff(ec, [](simple_acquire_op& op) { op.check(); });
    if (result == step_result::ok && st && st->ephemeral_owner == core_->zk.session_id()) remove_ours(*st, {});
  }

  // Our node (cancelled after the create succeeded, or found by the hunt):
  // delete it if still ours, then report.
  void remove_ours(const zk::stat& made, error_code report) {
    phase_ = phase::removing;
    start_node_removal(core_, {core_->path, made.czxid, made.ephemeral_owner}, report,
                       on_strand([self = shared()](error_code ec) { self->complete(ec); }));
  }

  void acquired(const zk::stat& made) {
    core_->on_acquired(core_->path, made.czxid, made.ephemeral_owner);
    complete({});
  }

  std::shared_ptr<simple_acquire_op> shared() {
    return std::static_pointer_cast<simple_acquire_op>(shared_from_this());
  }

  bool wait_;
  zk::watch watch_;
  std::optional<asio::steady_timer> timer_;
  phase phase_ = phase::creating;
  bool cancelled_ = false;
  bool create_unknown_ = false;
  bool hunting_ = false;  // failed; looking for the node our unanswered create may have made
  error_code reason_;
  error_code ensure_error_;
  std::size_t pending_ = 0;
  int attempts_ = 0;
};

}  // namespace

std::shared_ptr<acquire_op_base> make_simple_acquire(const lock_core_ptr& core, acquire_mode mode,
                                                     asio::any_completion_handler<void(error_code)> handler) {
  return std::make_shared<simple_acquire_op>(core, mode, std::move(handler));
}

}  // namespace dlock::zk::detail
