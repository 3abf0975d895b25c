// Internal: one semaphore object's state, shared by its operations. Everything
// here runs on the client's strand, except the atomic lease count.
#pragma once

#include <dlock/lock_loss.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/semaphore.hpp>
#include <dlock/zk/watch.hpp>

#include "detail/observed_lock.hpp"
#include "detail/stall_monitor_impl.hpp"
#include "zk/locks/lock_core.hpp"  // owned_node, start_node_removal
#include "zk/recipe/acquire_op_base.hpp"
#include "zk/recipe/hold_monitor.hpp"
#include "zk/semaphore/semaphore_recipe.hpp"

#include <boost/asio/cancellation_signal.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace dlock::zk::detail {

/// A lease held: its node and the watch that tells us it was deleted.
struct held_lease {
  lease_node node;
  zk::watch watch;
};

class semaphore_core : public std::enable_shared_from_this<semaphore_core>, public hold_monitor {
 public:
  semaphore_core(client& zk_client, std::string semaphore_path, std::size_t max, semaphore_options opts);

  client zk;  // borrowed: background deletes outlive the user's handle
  asio::any_io_executor strand;
  std::string path;
  std::size_t max_leases;
  semaphore_options options;
  error_code argument_error;  // bad path or max_leases: every acquire fails
  lock_loss loss;
  dlock::detail::observed_lock observed;  // who is told of this semaphore's events
  std::chrono::steady_clock::time_point held_since{};  // the first lease of the set, when observed
  std::shared_ptr<stall_monitor> stall;                // the client's, if any
  dlock::detail::stall_subscription stall_watch;       // while leases are held
  // The context of start_node_removal (the client, strand and retry policy it
  // needs): deletes of lease nodes are the locks' ownership-checked ones.
  lock_core_ptr removal;

  std::vector<std::shared_ptr<held_lease>> held;  // acquisition order
  std::vector<lease_node> lost;                   // nodes of a lost hold, deleted at release
  std::atomic<std::size_t> count{0};              // held.size(), for leases() on any thread
  bool ever_held = false;
  bool lost_state = false;  // the last hold was lost and not released yet

  /// An acquire won `nodes`: hold them, arm the loss signal, watch them and the session.
  void on_acquired(const std::vector<lease_node>& nodes);
  /// The lease set is gone for `reason`: tell the holder, keep the nodes for release.
  void lose(error_code reason);
  /// While leases are held: a stall too long for the session's sake loses them.
  void watch_stalls();
  /// Deletes `nodes` (each only while ours); `done` once all were handled.
  void remove(std::vector<lease_node> nodes, error_code report, asio::any_completion_handler<void(error_code)> done);
  /// The `k` leases acquired last, no longer held (watches cancelled); when
  /// none is left, the set's hold ended by release (told to the observer).
  std::vector<lease_node> take_last(std::size_t k);
};

/// The acquire operation (acquire_shell.cpp): started on the strand.
std::shared_ptr<acquire_op_base> make_semaphore_acquire(const semaphore_core_ptr& core, semaphore_mode mode,
                                                          std::size_t count, semaphore_handler handler);

}  // namespace dlock::zk::detail
