// What the ZooKeeper lock recipes' state machines and their one Asio shell
// (src/zk/locks/acquire_shell.cpp) say to each other. A machine returns an
// action; the shell executes it on the client and reports the outcome
// through the matching on_* call, until the action is `done`. Every
// decision is the machine's; the shell only does I/O.
#pragma once

#include <dlock/config.hpp>

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace dlock::zk::detail {

/// Outcome of one ZooKeeper request, as far as the recipe cares.
enum class step_result {
  ok,
  no_node,
  node_exists,
  connection_loss,  ///< recoverable: the session may live; outcome of a create unknown
  session_lost,     ///< the session expired: its ephemeral nodes are gone
  closed,           ///< the client was closed
  aborted,          ///< a wait the shell interrupted after cancel()
  failed,           ///< anything else: not retried
};

/// A reply: what it means for the recipe, and the error to report if it ends the acquire.
struct reply {
  step_result result = step_result::ok;
  error_code ec;
};

/// What a machine asks its shell to do next.
enum class acquire_action {
  ensure_path,      ///< create path_to_ensure() and missing parents as containers (NODEEXISTS is fine):
                    ///  on_ensured
  create_and_list,  ///< create create_path() ephemeral+sequential with node data, then list
                    ///  lock_path() without a watch, pipelined: report both through on_created
  create,           ///< create create_path() ephemeral with node data: on_created (no listing)
  list,             ///< list lock_path() without a watch: on_listed
  check_owner,      ///< read the Stat of target_path() (ephemeralOwner, czxid): on_owner
  watch_owner,      ///< the same, with a watch on target_path() (an existence watch if it is
                    ///  missing, which the shell drops unless a `wait` follows): on_owner
  watch,            ///< get target_path() with a watch (no watch is left on NONODE): on_watch_set
  wait,             ///< wait for that watch to fire: on_watch_fired
  remove,           ///< delete target_path(): our node, checked ours (czxid, owner): on_removed
  remove_owned,     ///< hand our node at target_path() (fencing_token(), the session that made
                    ///  it) to the lock's node removal, which deletes it only while it is ours
                    ///  and retries while the session lives: on_removed
  backoff,          ///< sleep delay() (with jitter): on_backoff_done
  done,             ///< complete with result()
};

/// The interface of an acquire state machine, as its shell sees it.
class acquire_steps {
 public:
  using action = acquire_action;

  virtual ~acquire_steps() = default;

  virtual action start() = 0;
  virtual action on_ensured(reply r) = 0;
  virtual action on_created(reply create, std::string_view created_path, std::int64_t czxid, reply list,
                            std::span<const std::string> children) = 0;
  virtual action on_listed(reply r, std::span<const std::string> children) = 0;
  virtual action on_owner(reply r, std::int64_t ephemeral_owner, std::int64_t czxid, std::int64_t session_id) = 0;
  virtual action on_watch_set(reply r) = 0;
  virtual action on_watch_fired(reply r) = 0;
  virtual action on_removed(reply r) = 0;
  virtual action on_backoff_done() = 0;

  /// The caller gave up (cancelled, timed out): the acquire completes with
  /// `reason` once nothing of ours is left. Returns true when the shell must
  /// interrupt its current `wait` or `backoff` (which then reports aborted /
  /// done); otherwise the reply in flight drives the cleanup.
  virtual bool cancel(error_code reason) = 0;

  virtual const std::string& lock_path() const noexcept = 0;
  virtual const std::string& path_to_ensure() const noexcept = 0;
  virtual const std::string& create_path() const noexcept = 0;
  virtual const std::string& target_path() const noexcept = 0;
  /// Our node's full path once created (empty before).
  virtual const std::string& own_path() const noexcept = 0;
  virtual std::chrono::milliseconds delay() const noexcept = 0;
  virtual error_code result() const noexcept = 0;
  virtual std::int64_t fencing_token() const noexcept = 0;
  virtual bool cancelled() const noexcept = 0;
  /// True while only the cleanup of our node is left to do.
  virtual bool cleaning() const noexcept = 0;
  /// True when the next read must follow a `sync` of lock_path(): after a
  /// create's reply was lost, a member we reconnected to could answer before
  /// our create (sent on the old connection) committed.
  virtual bool needs_sync() const noexcept = 0;
  /// True once the acquire has failed (with result()) and only the search
  /// for a node our unanswered create may have made goes on.
  virtual bool hunting() const noexcept = 0;

 protected:
  acquire_steps() = default;
  acquire_steps(const acquire_steps&) = default;
  acquire_steps& operator=(const acquire_steps&) = default;
};

}  // namespace dlock::zk::detail
