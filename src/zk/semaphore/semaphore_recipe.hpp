// The semaphore's acquire (Curator's InterProcessSemaphoreV2 protocol) as an
// I/O-free state machine: the shell (acquire_shell.cpp) executes each action
// and reports its outcome through the matching on_* call until `done`.
// Unit-tested without a server (test/unit/zk/semaphore_recipe.cpp).
#pragma once

#include <dlock/config.hpp>

#include "zk/locks/acquire_steps.hpp"  // reply, step_result
#include "zk/recipe/retry.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::zk::detail {

/// A lease node of ours and what proves it is ours.
struct lease_node {
  std::string path;
  std::int64_t czxid = 0;
  std::int64_t owner = 0;  ///< the session that created it
};

/// The reply to one lease create.
struct created_lease {
  reply r;
  std::string path;
  std::int64_t czxid = 0;
  std::int64_t owner = 0;
};

/// The reply to one owner check (exists).
struct owner_reply {
  reply r;
  std::int64_t ephemeral_owner = 0;
  std::int64_t czxid = 0;
};

enum class semaphore_action {
  lock,          ///< acquire the `locks` mutex (try_acquire when not waiting): on_locked
  ensure,        ///< create leases_path() and its parents as containers: on_ensured
  create,        ///< create to_create() nodes at create_path() (ephemeral sequential), then list
                 ///  leases_path() with a children watch, pipelined: on_created
  recover,       ///< sync, then list leases_path() without a watch: on_recovered
  check_owners,  ///< exists on every targets() path: on_owners (in that order)
  list,          ///< list leases_path() with a children watch: on_listed
  wait,          ///< wait for that watch: on_watch_fired
  remove,        ///< delete nodes(), each only while ours: on_removed
  unlock,        ///< release the mutex: on_unlocked
  confirm,       ///< exists on every nodes() path (the grant's connection dropped): on_confirmed
  backoff,       ///< sleep delay(): on_backoff_done
  done,          ///< complete with result()
};

/// Curator's test, on a listing of `leases`: every child counts.
enum class lease_verdict { granted, full, missing };
lease_verdict judge_leases(std::span<const std::string> children, std::span<const lease_node> ours,
                           std::size_t max_leases);

/// "_c_<guid>-lease-": Curator's protected name, which the server appends a sequence to.
std::string lease_prefix(std::string_view guid);

class semaphore_machine {
 public:
  using action = semaphore_action;
  struct settings {
    std::string path;  ///< the semaphore's path
    std::size_t count = 1;
    std::size_t max_leases = 1;
    bool wait = true;  ///< false: try_acquire
    retry_policy retry;
  };

  semaphore_machine(settings s, std::string guid);

  action start();
  action on_locked(reply r);
  action on_ensured(reply r);
  action on_created(std::span<const created_lease> creates, reply list, std::span<const std::string> children);
  action on_recovered(reply r, std::span<const std::string> children);
  action on_owners(std::span<const owner_reply> owners, std::int64_t session_id);
  action on_listed(reply r, std::span<const std::string> children);
  action on_watch_fired(reply r);
  action on_removed();
  /// `connected`: the session's connection is up as the mutex's release
  /// ends (a release that lost its connection still "succeeds", deleting in
  /// the background, so the shell reports the connection itself).
  action on_unlocked(bool connected);
  action on_confirmed(std::span<const owner_reply> owners, std::int64_t session_id);
  action on_backoff_done();
  /// The caller gave up: completes with `reason` once nothing of ours is
  /// left. True when the shell must interrupt its `lock`, `wait` or `backoff`.
  bool cancel(error_code reason);

  const std::string& locks_path() const noexcept { return locks_path_; }
  const std::string& leases_path() const noexcept { return leases_path_; }
  const std::string& create_path() const noexcept { return create_path_; }
  std::size_t to_create() const noexcept { return to_create_; }
  const std::vector<std::string>& targets() const noexcept { return targets_; }
  /// Our lease nodes: the ones to delete (`remove`), or the leases won (`done`, no error).
  const std::vector<lease_node>& nodes() const noexcept { return nodes_; }
  std::chrono::milliseconds delay() const noexcept { return retries_.delay(); }
  error_code result() const noexcept { return result_; }
  bool cancelled() const noexcept { return cancelled_; }
  /// Failed or cancelled: only the deletion of what we made is left.
  bool winding() const noexcept { return winding_; }
  /// The acquire failed (result()); only the search for nodes of unanswered creates goes on.
  bool hunting() const noexcept { return hunting_; }
  /// A read after a lost create reply must follow a sync: the member we
  /// reconnected to may not have applied our create yet.
  bool needs_sync() const noexcept { return state_ == state::recovering; }

 private:
  enum class state {
    idle, locking, ensuring, creating, recovering, checking_owners, listing, waiting,
    cleaning, unlocking, confirming, backing_off, finished,
  };

  action go(state s, action a);
  action create();
  action list();
  action recovered();
  action decide(std::span<const std::string> children);
  action retry(state then, error_code ec);
  action resume(state s);
  action wind_up(error_code ec);
  action hunt();
  action finish(error_code ec);

  settings settings_;
  std::string guid_;
  std::string locks_path_, leases_path_, create_path_;
  std::vector<lease_node> nodes_;
  std::vector<std::string> targets_;
  std::size_t to_create_ = 0;
  std::size_t unknown_ = 0;  // creates whose reply was lost: their nodes may exist
  state state_ = state::idle;
  bool locked_ = false;     // we hold the `locks` mutex
  bool granted_ = false;    // the leases are ours; only the mutex's release is left
  bool winding_ = false;    // failed or cancelled: deleting what we made, then done
  bool hunting_ = false;
  bool cancelled_ = false;
  error_code cancel_reason_;
  error_code result_;
  retry_pause<state> retries_;  // failures since the last progress, and the step to resume
};

}  // namespace dlock::zk::detail
