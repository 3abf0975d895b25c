// The ZooKeeper lock recipe as I/O-free logic: node names, ordering, the
// decision after a listing, and the acquire steps as a state machine whose
// actions an Asio shell executes. Unit-tested without a server.
//
// Node names follow Apache Curator so JVM and C++ services can share a lock:
//   mutex   <path>/_c_<uuid>-lock-<seq>
//   reader  <path>/_c_<uuid>-__READ__<seq>
//   writer  <path>/_c_<uuid>-__WRIT__<seq>
// <uuid> is a random (v4) UUID, 36 lowercase characters with dashes: the GUID
// that finds our node again when a create's reply is lost. <seq> is the
// server's "%010d" of the parent's signed 32-bit child counter.
#pragma once

#include <dlock/config.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::zk::detail {

/// What a contender node asks for, read from its name.
enum class lock_kind {
  exclusive,  ///< Curator "-lock-"
  read,       ///< Curator "__READ__", kazoo "__rlock__"
  write,      ///< Curator "__WRIT__", kazoo "__lock__"
  foreign,    ///< any other name ending in a sequence: treated as exclusive
};

/// How a contender decides whether it holds the lock.
enum class lock_role { exclusive, reader, writer };

/// One contender: views into the child name it was parsed from.
struct lock_node {
  std::string_view name;
  std::string_view guid;  ///< empty unless the name is protected ("_c_<uuid>-")
  lock_kind kind = lock_kind::foreign;
  std::int32_t sequence = 0;
};

/// A random UUID v4 from the system CSPRNG: lowercase, with dashes.
std::string make_guid();
bool is_guid(std::string_view text) noexcept;

/// "_c_<guid>-lock-" and friends: the name the server appends a sequence to.
std::string node_prefix(lock_role role, std::string_view guid);

/// Parses a child name; nullopt when it has no sequence suffix.
std::optional<lock_node> parse_node(std::string_view name) noexcept;

/// True when `a` was created before `b`. The counter is a wrapping signed
/// 32-bit number, so compare by serial-number arithmetic, not by value: this
/// stays right across the wrap at 2^31 (where Curator's string compare does not).
inline bool sequence_before(std::int32_t a, std::int32_t b) noexcept {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) - static_cast<std::uint32_t>(b)) < 0;
}

/// Contenders in queue order (by sequence, never by prefix). Children with
/// no sequence suffix are left out with a log line. The result views `children`.
std::vector<lock_node> sort_contenders(std::span<const std::string> children);

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

/// The child whose name carries our GUID, if any (recovery after a lost create reply).
std::optional<std::string_view> find_guid_child(std::string_view guid,
                                                std::span<const std::string> children) noexcept;

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

/// Bounded retries of recoverable errors, with exponential backoff.
struct retry_policy {
  int max_attempts = 8;
  std::chrono::milliseconds initial_backoff{20};
  std::chrono::milliseconds max_backoff{1000};
};

/// The acquire steps. The shell executes the returned action, then reports its
/// outcome through the matching on_* call, until the action is `done`.
class acquire_machine {
 public:
  enum class action {
    ensure_path,      ///< create lock_path() and missing parents as containers (NODEEXISTS is fine)
    create_and_list,  ///< create create_path() ephemeral+sequential with node data, then list
                      ///  lock_path() without a watch, pipelined: report both through on_created
    list,             ///< list lock_path() without a watch
    check_owner,      ///< read the Stat of target_path() (ephemeralOwner, czxid)
    watch,            ///< get target_path() with a watch (no watch is left on NONODE)
    wait,             ///< wait for that watch to fire
    remove,           ///< delete target_path(): our node, checked ours (czxid, owner)
    backoff,          ///< sleep delay()
    done,             ///< complete with result()
  };

  struct settings {
    lock_role role = lock_role::exclusive;
    std::string lock_path;
    bool wait = true;  ///< false: try_acquire, fail with `taken` rather than wait
    retry_policy retry;
  };

  acquire_machine(settings s, std::string guid);

  action start();
  action on_ensured(reply r);
  action on_created(reply create, std::string_view created_path, std::int64_t czxid, reply list,
                    std::span<const std::string> children);
  action on_listed(reply r, std::span<const std::string> children);
  action on_owner(reply r, std::int64_t ephemeral_owner, std::int64_t czxid, std::int64_t session_id);
  action on_watch_set(reply r);
  action on_watch_fired(reply r);
  action on_removed(reply r);
  action on_backoff_done();

  /// The caller gave up (cancelled, timed out): the acquire completes with
  /// `reason` once our node, if any, is deleted. Returns true when the shell
  /// must interrupt its current `wait` or `backoff` (which then reports
  /// aborted / done); otherwise the reply in flight drives the cleanup.
  bool cancel(error_code reason);

  const std::string& lock_path() const noexcept { return settings_.lock_path; }
  const std::string& create_path() const noexcept { return create_path_; }
  const std::string& target_path() const noexcept { return target_path_; }
  /// Our node's full path once created (empty before).
  const std::string& own_path() const noexcept { return own_path_; }
  std::chrono::milliseconds delay() const noexcept { return delay_; }
  error_code result() const noexcept { return result_; }
  std::int64_t fencing_token() const noexcept { return czxid_; }
  const std::string& guid() const noexcept { return guid_; }
  bool cancelled() const noexcept { return cancelled_; }
  /// True while only the cleanup of our node is left to do.
  bool cleaning() const noexcept {
    return state_ == state::cleaning || (state_ == state::backing_off && after_backoff_ == state::cleaning);
  }
  /// True while looking for our node after a create's reply was lost: the
  /// listing must follow a `sync`, or a member we reconnected to could list
  /// the children before our create (sent on the old connection) committed.
  bool recovering() const noexcept { return state_ == state::recovering; }
  /// True once the acquire has failed (with result()) and only the search
  /// for a node our unanswered create may have made goes on.
  bool hunting() const noexcept { return hunting_; }

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
  action finish(error_code ec);
  action fail(reply r);
  action create();
  action go(state s, action a);

  settings settings_;
  std::string guid_;
  std::string create_path_;
  std::string own_path_;
  std::string target_path_;
  state state_ = state::idle;
  state after_backoff_ = state::idle;
  bool create_unknown_ = false;  // a create's reply was lost: our node may exist
  bool hunting_ = false;         // failed; searching for that node in the background
  bool cancelled_ = false;
  error_code cancel_reason_;
  error_code result_;
  int attempts_ = 0;
  std::chrono::milliseconds delay_{0};
  std::int64_t czxid_ = 0;
};

}  // namespace dlock::zk::detail
