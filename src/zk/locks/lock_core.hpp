// Internal: one lock object's state, shared by its operations. Everything
// here runs on the client's strand.
#pragma once

#include "detail/observed_lock.hpp"
#include "detail/stall_monitor_impl.hpp"
#include "detail/op_base.hpp"

#include <dlock/error.hpp>
#include <dlock/lock_loss.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/detail/lock_core_api.hpp>

#include "lock_recipe.hpp"
#include "zk/recipe/acquire_op_base.hpp"  // also classify()
#include "zk/recipe/hold_monitor.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace dlock::zk::detail {

/// A node we created, and what proves it is still ours: the session that
/// created it and its creation zxid.
struct owned_node {
  std::string path;
  std::int64_t czxid = 0;
  std::int64_t session = 0;
};

class lock_core : public std::enable_shared_from_this<lock_core>, public hold_monitor {
 public:
  enum class hold { idle, acquiring, held, lost, released };

  lock_core(client& zk_client, std::string lock_path, lock_role lock_role_, lock_flavor lock_flavor_,
            lock_options lock_opts);

  client zk;  // borrowed: the session outlives background work, the user's handle may not
  asio::any_io_executor strand;
  std::string path;
  lock_role role;
  lock_flavor flavor;
  lock_options options;
  error_code path_error;  // set once at construction: a bad path fails every acquire
  lock_loss loss;
  dlock::detail::observed_lock observed;  // who is told of this lock's events
  std::chrono::steady_clock::time_point held_since{};  // when observed
  std::shared_ptr<stall_monitor> stall;         // the client's, if any
  dlock::detail::stall_subscription stall_watch;  // while held

  // Atomic: held() and fencing_token() read them from the holder's thread.
  std::atomic<hold> state{hold::idle};
  std::string own_path;      // our node while held (or lost, until released)
  std::atomic<std::int64_t> czxid{0};  // fencing token of the current hold
  std::int64_t session = 0;  // the session that created our node

  /// The hold began: remember our node (created by session `owner`), arm the
  /// loss signal, watch the session.
  void on_acquired(std::string node, std::int64_t zxid, std::int64_t owner);
  /// The hold is gone for `reason`: tell the holder.
  void lose(error_code reason);
  /// The hold ends by release (or the lock's destruction): tell the observer.
  void released_while_held();
  /// While held: a stall too long for the session's sake loses the hold.
  void subscribe_to_stalls();
  /// Our node (held or lost), handed to its removal; forgotten here.
  owned_node take_own_node();
};

/// Deletes `node` if it is still ours (its session lives and, on a retry,
/// its owner and czxid match), retried across connection loss while the
/// session lives; completes `handler` (if any) with `report` once deleted or
/// found gone, at the first connection loss (the retries continue in the
/// background), or with the loss reason when the session ended.
void start_node_removal(const lock_core_ptr& core, owned_node node, error_code report,
                        asio::any_completion_handler<void(error_code)> handler);

/// The acquire of either flavour: the flavour's state machine in the one shell (acquire_shell.cpp).
std::shared_ptr<acquire_op_base> make_acquire(const lock_core_ptr& core, acquire_mode mode,
                                              asio::any_completion_handler<void(error_code)> handler);

}  // namespace dlock::zk::detail
