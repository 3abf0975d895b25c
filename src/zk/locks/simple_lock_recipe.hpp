// The simple lock as I/O-free logic: one ephemeral node at the lock path.
// Taken means NODEEXISTS: read the node's owner with a watch, wait for it to
// go, and try again. Every waiter wakes on each release (the herd effect)
// and the fastest wins (not fair). Executed by the same shell as the
// sequential recipe (acquire_steps.hpp); unit-tested without a server.
#pragma once

#include <dlock/config.hpp>

#include "acquire_steps.hpp"
#include "zk/recipe/retry.hpp"

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace dlock::zk::detail {

class simple_acquire_machine final : public acquire_steps {
 public:
  struct settings {
    std::string lock_path;  ///< the node itself
    bool wait = true;       ///< false: try_acquire, fail with `taken` rather than wait
    retry_policy retry;
  };

  explicit simple_acquire_machine(settings s);

  action start() override;
  action on_ensured(reply r) override;
  /// `list` and `children` are not used: this recipe never lists.
  action on_created(reply create, std::string_view created_path, std::int64_t czxid, reply list,
                    std::span<const std::string> children) override;
  action on_owner(reply r, std::int64_t ephemeral_owner, std::int64_t czxid, std::int64_t session_id) override;
  action on_watch_fired(reply r) override;
  action on_removed(reply r) override;
  action on_backoff_done() override;
  bool cancel(error_code reason) override;
  /// Never asked for (this recipe neither lists nor arms a data watch): fail.
  action on_listed(reply r, std::span<const std::string> children) override;
  action on_watch_set(reply r) override;

  const std::string& lock_path() const noexcept override { return settings_.lock_path; }
  /// The lock node's parent (the node itself is the lock).
  const std::string& path_to_ensure() const noexcept override { return parent_; }
  const std::string& create_path() const noexcept override { return settings_.lock_path; }
  const std::string& target_path() const noexcept override { return settings_.lock_path; }
  const std::string& own_path() const noexcept override { return own_path_; }
  std::chrono::milliseconds delay() const noexcept override { return delay_; }
  error_code result() const noexcept override { return result_; }
  std::int64_t fencing_token() const noexcept override { return czxid_; }
  bool cancelled() const noexcept override { return cancelled_; }
  bool cleaning() const noexcept override { return state_ == state::removing; }
  bool needs_sync() const noexcept override { return create_unknown_; }
  bool hunting() const noexcept override { return hunting_; }

 private:
  enum class state { idle, creating, checking, waiting, ensuring, backing_off, removing, finished };

  action create();
  action check();
  action ensure_parent();
  action backoff(error_code ec);
  action hunted(reply r, std::int64_t ephemeral_owner, std::int64_t czxid, std::int64_t session_id);
  action remove_ours(std::int64_t czxid, error_code report);
  action finish(error_code ec);
  action go(state s, action a);

  settings settings_;
  std::string parent_;
  std::string own_path_;
  state state_ = state::idle;
  bool create_unknown_ = false;  // a create's reply was lost: our node may exist
  bool hunting_ = false;         // failed; looking for the node our unanswered create may have made
  bool cancelled_ = false;
  error_code cancel_reason_;
  error_code result_;
  retry_counter retries_;  // ensures and backoffs of this acquire, together
  std::chrono::milliseconds delay_{0};
  std::int64_t czxid_ = 0;
};

}  // namespace dlock::zk::detail
