/// @file
/// Leader election on ZooKeeper: the leader is whoever holds the election's lock.
#pragma once

#include <dlock/config.hpp>
#include <dlock/detail/initiation.hpp>
#include <dlock/lock_loss.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/detail/lock_options.hpp>
#include <dlock/zk/mutex.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace dlock::zk {

/// How a `leader_election` behaves.
struct election_options {
  /// When leadership counts as lost: `standard` (Curator's default) on a
  /// suspended connection, `session` only when the session is lost.
  loss_policy policy = loss_policy::standard;
  retry_policy retry;  ///< how requests cut by a connection loss are retried

  /// A campaign whose session expires before it leads joins again on the
  /// reopened session instead of failing (see `lock_options::restart_after_expiry`).
  bool restart_after_expiry = false;
};

namespace detail {
template <class... T>
using election_handler = asio::any_completion_handler<void(error_code, T...)>;
void start_current_leader(client zk, std::string path, election_handler<std::optional<std::string>> h);
void start_observe(client zk, std::string path, std::optional<std::string> last_seen,
                   election_handler<std::optional<std::string>> h);
}  // namespace detail

/// A candidate in a leader election on ZooKeeper.
///
/// In the vocabulary of etcd's election and Curator's LeaderLatch. Each
/// candidate is an ephemeral-sequential node under `path` carrying its id as
/// data (the mutex's Curator-compatible `_c_<uuid>-lock-<seq>` names); the
/// oldest candidate leads, and each waits herd-free, watching only its
/// predecessor, so a resignation or a lost session hands leadership to the
/// next candidate in creation order.
///
/// Leadership can be lost (session expired or, by policy, suspended): watch
/// `loss()` or bind a cancellation signal to it, exactly like a lock. The
/// term's fencing token is the candidate node's creation zxid.
///
/// Operations complete on the handler's associated executor. Every
/// operation keeps the session it needs: destroying or moving the client or
/// the election object while one runs makes it complete with
/// `dlock::error::closed` (or finish), never touch freed memory. Each
/// operation's reference says which cancellation it honours.
class leader_election {
 public:
  /// A candidate of the election at `path` (its node), on `zk`'s session.
  leader_election(client& zk, std::string path, election_options options = {})
      : zk_(detail::borrow_session(zk)),
        path_(std::move(path)),
        candidate_(zk, path_,
                   lock_options{.identifier = {}, .policy = options.policy, .retry = options.retry,
                                .restart_after_expiry = options.restart_after_expiry}) {}

  /// Joins as candidate `id` (the node's data) and completes once this candidate leads.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor, Cancellation, Lifetime
  /// As `mutex::acquire()`: terminal, partial and total; a cancelled campaign
  /// leaves no node.
  /// @par Errors
  /// Those of `mutex::acquire()`: `dlock::error::already_held` while leading,
  /// `in_progress` while a campaign of this object runs, ...
  template <class CompletionToken = default_token>
  auto campaign(std::string id, CompletionToken&& token = {}) {
    return candidate_.acquire_as(std::move(id), std::forward<CompletionToken>(token));
  }

  /// Steps down: the next candidate becomes leader.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor, Cancellation, Errors
  /// As `mutex::release()`: never cancelled; `dlock::error::not_held` without
  /// a campaign, the loss reason after a loss, success for a second resign.
  template <class CompletionToken = default_token>
  auto resign(CompletionToken&& token = {}) {
    return candidate_.release(std::forward<CompletionToken>(token));
  }

  /// The current leader's id, or `std::nullopt` when there is none.
  ///
  /// @par Handler signature
  /// `void(error_code, std::optional<std::string>)`.
  /// @par Executor
  /// The handler's associated executor (else the client's strand); never
  /// inside this call.
  /// @par Cancellation
  /// Terminal only (`asio::error::operation_aborted`); partial and total are
  /// ignored: it is two reads.
  /// @par Errors
  /// `dlock::error::invalid_argument` (bad path), `zk::error::connection_loss`
  /// after 10 attempts, or the reads' errors (`closed`, `session_expired`, ...).
  /// @par Lifetime
  /// Keeps the session: the election object and the client may be destroyed
  /// meanwhile (then `dlock::error::closed`).
  template <class CompletionToken = default_token>
  auto leader(CompletionToken&& token = {}) {
    using signature = void(error_code, std::optional<std::string>);
    return dlock::detail::async_initiate_on<CompletionToken, signature>(*this,
        [](auto h, client zk, std::string path) {
          detail::start_current_leader(std::move(zk), std::move(path),
                                       detail::election_handler<std::optional<std::string>>(std::move(h)));
        },
        token, detail::borrow_session(zk_), path_);
  }

  /// Completes with the leader's id as soon as it differs from `last_seen`
  /// (at once if it already does); call it again with the result to follow
  /// every change. Waits with one watch on the leader's node (or on the
  /// election node while it has no candidate). For followers and tools.
  /// A change between two candidates with the same id is not seen: give
  /// each candidate a distinct id.
  ///
  /// @par Handler signature
  /// `void(error_code, std::optional<std::string>)` (`std::nullopt`: the
  /// leader left and nobody follows).
  /// @par Executor, Lifetime
  /// As `leader()`.
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`
  /// and removes its watch.
  /// @par Errors
  /// `dlock::error::invalid_argument` (bad path), `zk::error::session_expired`
  /// while waiting, or the reads' errors (`closed`, ...).
  template <class CompletionToken = default_token>
  auto observe(std::optional<std::string> last_seen, CompletionToken&& token = {}) {
    using signature = void(error_code, std::optional<std::string>);
    return dlock::detail::async_initiate_on<CompletionToken, signature>(*this,
        [](auto h, client zk, std::string path, std::optional<std::string> seen) {
          detail::start_observe(std::move(zk), std::move(path), std::move(seen),
                                detail::election_handler<std::optional<std::string>>(std::move(h)));
        },
        token, detail::borrow_session(zk_), path_, std::move(last_seen));
  }

  /// The executor the election's operations run on (the client's strand).
  asio::any_io_executor get_executor() const noexcept { return candidate_.get_executor(); }

  /// True between a successful campaign and resignation or loss.
  bool is_leader() const noexcept { return candidate_.held(); }

  /// The term's fencing token (the candidate node's czxid); 0 when not leader.
  std::int64_t fencing_token() const noexcept { return candidate_.fencing_token(); }
  /// A `client::multi` operation that fails the transaction unless this
  /// candidate still leads (see `mutex::ownership_check()`).
  op ownership_check() const { return candidate_.ownership_check(); }

  /// Tells the leader its leadership is gone. Valid at any time: before a
  /// campaign, `loss().wait()` completes with `dlock::error::not_held`.
  lock_loss& loss() noexcept { return candidate_.loss(); }

  /// The election's node.
  const std::string& path() const noexcept { return path_; }

 private:
  client zk_;  // a borrowed handle on the user's session
  std::string path_;
  mutex candidate_;
};

}  // namespace dlock::zk
