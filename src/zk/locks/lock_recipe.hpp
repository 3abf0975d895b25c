// The ZooKeeper lock recipe as I/O-free logic: the decision after a listing,
// and the acquire steps as a state machine whose actions the one Asio shell
// (src/zk/locks/acquire_shell.cpp) executes. Unit-tested without a server.
// Node names and their order: node_names.hpp. Retries: retry.hpp.
#pragma once

#include <dlock/config.hpp>

#include "acquire_steps.hpp"
#include "zk/recipe/node_names.hpp"
#include "zk/recipe/retry.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::zk::detail {

/// What a contender does after listing the lock's children.
struct decision {
  enum outcome_type {
    holder,  ///< we hold the lock
    wait,    ///< watch `watch` (a child name) and list again when it goes
    gone,    ///< our own node is not there (our session had a problem)
  } outcome = gone;
  std::string_view watch;
};

/// Mutex and writer: holder if first, else watch the immediate predecessor.
/// Reader: holder if no write node sorts lower, else watch the nearest lower one.
decision decide(lock_role role, std::string_view own_name, std::span<const std::string> children);

/// The acquire steps. The shell executes the returned action, then reports its
/// outcome through the matching on_* call, until the action is `done`.
class acquire_machine final : public acquire_steps {
 public:
  struct settings {
    lock_role role = lock_role::exclusive;
    std::string lock_path;
    bool wait = true;  ///< false: try_acquire, fail with `taken` rather than wait
    retry_policy retry;
  };

  acquire_machine(settings s, std::string guid);

  action start() override;
  action on_ensured(reply r) override;
  action on_created(reply create, std::string_view created_path, std::int64_t czxid, reply list,
                    std::span<const std::string> children) override;
  action on_listed(reply r, std::span<const std::string> children) override;
  action on_owner(reply r, std::int64_t ephemeral_owner, std::int64_t czxid, std::int64_t session_id) override;
  action on_watch_set(reply r) override;
  action on_watch_fired(reply r) override;
  action on_removed(reply r) override;
  action on_backoff_done() override;
  bool cancel(error_code reason) override;

  const std::string& lock_path() const noexcept override { return settings_.lock_path; }
  /// The lock path itself: its children are the contenders.
  const std::string& path_to_ensure() const noexcept override { return settings_.lock_path; }
  const std::string& create_path() const noexcept override { return create_path_; }
  const std::string& target_path() const noexcept override { return target_path_; }
  const std::string& own_path() const noexcept override { return own_path_; }
  std::chrono::milliseconds delay() const noexcept override { return retries_.delay(); }
  error_code result() const noexcept override { return result_; }
  std::int64_t fencing_token() const noexcept override { return czxid_; }
  const std::string& guid() const noexcept { return guid_; }
  bool cancelled() const noexcept override { return cancelled_; }
  bool cleaning() const noexcept override {
    return state_ == state::cleaning || (state_ == state::backing_off && retries_.resumes() == state::cleaning);
  }
  /// True while looking for our node after a create's reply was lost.
  bool recovering() const noexcept { return state_ == state::recovering; }
  bool needs_sync() const noexcept override { return recovering(); }
  bool hunting() const noexcept override { return hunting_; }

 private:
  enum class state {
    idle, ensuring, creating, recovering, checking_owner, listing, watching, waiting,
    cleaning, backing_off, finished,
  };

  action decide_after_listing(std::span<const std::string> children);
  action retry(state then, error_code ec);
  action resume(state s);
  action cleanup(error_code ec);
  action hunt(error_code ec);
  action create_never_happened();
  action recovery_failed(const reply& r);
  action finish(error_code ec);
  action fail(reply r);
  action failed_in_line(reply r);
  action on_predecessor_watch(reply r, bool armed);
  action create();
  action go(state s, action a);

  settings settings_;
  std::string guid_;
  std::string create_path_;
  std::string own_path_;
  std::string target_path_;
  state state_ = state::idle;
  bool create_unknown_ = false;  // a create's reply was lost: our node may exist
  bool hunting_ = false;         // failed; searching for that node in the background
  bool cancelled_ = false;
  error_code cancel_reason_;
  error_code result_;
  retry_pause<state> retries_;  // failures since the last progress, and the step to resume
  std::int64_t czxid_ = 0;
};

}  // namespace dlock::zk::detail
