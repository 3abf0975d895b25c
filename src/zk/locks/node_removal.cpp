// Deleting our node (release, cancelled acquires, the leftovers of a lost
// hold), only while it is ours.
#include "lock_core.hpp"

#include <dlock/log.hpp>
#include <dlock/zk/error.hpp>

#include <boost/asio/steady_timer.hpp>

namespace dlock::zk::detail {
namespace {

// --- node removal (release, and the leftovers of a lost hold) ---

// Deletes our node only while it is ours. Ephemeral nodes die with their
// session, so once the session changed there is nothing of ours to delete
// (and the path may be someone else's node by now). On the same session the
// first delete is safe: our node is there until we delete it. A retry is
// not: the first delete may have been applied before its reply was lost,
// and the simple lock's fixed path may hold the next holder's node. So a
// retry reads the node's owner and creation zxid first.
class removal_op : public std::enable_shared_from_this<removal_op> {
 public:
  removal_op(lock_core_ptr core, owned_node node, error_code report,
             asio::any_completion_handler<void(error_code)> handler)
      : core_(std::move(core)), node_(std::move(node)), report_(report), op_(std::move(handler)),
        timer_(core_->strand), retries_(core_->options.retry) {}

  void start() {
    if (core_->zk.state() == session_state::closed)
      return complete(report_ ? report_ : make_error_code(dlock::error::closed));
    if (core_->zk.session_id() != node_.session) {
      // The session that owned the node ended, and took the node with it.
      return complete(report_ ? report_ : make_error_code(zk::error::session_expired));
    }
    if (!verify_) return remove();
    core_->zk.exists(node_.path,
                     asio::bind_executor(core_->strand, [self = shared_from_this()](error_code ec,
                                                                                    std::optional<zk::stat> st) {
                       self->on_checked(ec, st);
                     }));
  }

 private:
  void remove() {
    core_->zk.remove(node_.path, -1, asio::bind_executor(core_->strand, [self = shared_from_this()](error_code ec) {
                       self->on_removed(ec);
                     }));
  }

  void on_checked(error_code ec, const std::optional<zk::stat>& st) {
    if (!ec && !st) return complete(report_);  // gone: our delete was applied, or the session took it
    if (!ec && (st->ephemeral_owner != node_.session || st->czxid != node_.czxid)) {
      if (dlock::detail::log_enabled(log_level::info))
        dlock::detail::log(log_level::info, "zk lock: " + node_.path + " is not ours any more; left alone");
      return complete(report_);
    }
    if (!ec) return remove();
    on_removed(ec);  // the same outcomes as a failed delete
  }

  void on_removed(error_code ec) {
    switch (classify(ec)) {
      case step_result::ok:
      case step_result::no_node:
        return complete(report_);
      case step_result::connection_loss:
        // The session may live: keep trying in the background, but do not
        // hold the caller hostage to a reconnection.
        complete(report_);
        verify_ = true;
        retries_.count_failure();  // unbounded while the session lives
        timer_.expires_after(with_jitter(retries_.delay()));
        timer_.async_wait(asio::bind_executor(core_->strand, [self = shared_from_this()](error_code) {
          self->start();
        }));
        return;
      case step_result::session_lost:
        // The session ended, and our ephemeral node with it: the hold was lost.
        return complete(report_ ? report_ : ec);
      case step_result::closed:
        // The client was closed (a program exiting, say): closing ended the
        // session, which takes our ephemeral node with it. Nothing to report.
        return complete(report_ ? report_ : ec);
      default:
        if (dlock::detail::log_enabled(log_level::error))
          dlock::detail::log(log_level::error, "zk lock: could not delete " + node_.path + ": " + ec.message());
        return complete(report_ ? report_ : ec);
    }
  }

  // Once: the retries that follow a connection loss report nothing more.
  void complete(error_code ec) { op_.complete(dlock::detail::completion::dispatch, core_->strand, ec); }

  lock_core_ptr core_;
  owned_node node_;
  error_code report_;
  dlock::detail::op_base<void(error_code)> op_;  // no handler: a removal nobody waits for
  asio::steady_timer timer_;
  retry_counter retries_;
  bool verify_ = false;
};

}  // namespace

void start_node_removal(const lock_core_ptr& core, owned_node node, error_code report,
                        asio::any_completion_handler<void(error_code)> handler) {
  std::make_shared<removal_op>(core, std::move(node), report, std::move(handler))->start();
}

}  // namespace dlock::zk::detail
