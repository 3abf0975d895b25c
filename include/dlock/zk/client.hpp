/// @file
/// A ZooKeeper session driven entirely by the user's io_context.
#pragma once

#include <dlock/config.hpp>
#include <dlock/detail/initiation.hpp>
#include <dlock/zk/error.hpp>
#include <dlock/zk/multi.hpp>
#include <dlock/zk/options.hpp>
#include <dlock/zk/types.hpp>
#include <dlock/zk/watch.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

/// ZooKeeper: the session client and the recipes built on it.
namespace dlock::zk {

namespace detail {
class session;
template <class... Args>
using handler = asio::any_completion_handler<void(error_code, Args...)>;
using session_ptr = std::shared_ptr<session>;

void start_connect(const session_ptr& s, handler<> h);
void start_close(const session_ptr& s, handler<> h);
void start_wait_state_change(const session_ptr& s, handler<session_state> h);
void start_create(const session_ptr& s, std::string path, std::string data, create_mode mode,
                  handler<created> h);
void start_remove(const session_ptr& s, std::string path, std::int32_t version, handler<> h);
void start_get(const session_ptr& s, std::string path, watch* w, handler<std::string, stat> h);
void start_set(const session_ptr& s, std::string path, std::string data, std::int32_t version,
               handler<stat> h);
void start_exists(const session_ptr& s, std::string path, watch* w,
                  handler<std::optional<stat>> h);
void start_get_children(const session_ptr& s, std::string path, watch* w,
                        handler<std::vector<std::string>, stat> h);
void start_multi(const session_ptr& s, std::vector<op> ops, handler<multi_result> h);
void start_sync(const session_ptr& s, std::string path, handler<> h);

template <class Token>
concept not_a_watch = !std::is_same_v<std::remove_cvref_t<Token>, zk::watch>;
}  // namespace detail

class client;
namespace detail {
/// For dlock's recipes: a handle on `owner`'s session that does not close it.
/// Background work (a release retried after a loss) holds one, so it meets a
/// closed session, never freed memory, once the user's client is gone.
client borrow_session(const client& owner);
/// For dlock's recipes, on the client's strand: the servers cannot have
/// expired the session yet (the client heard from them within the session
/// timeout, less a margin). A grant decided later is not trusted.
bool session_vouched_for(const client& owner);
}  // namespace detail

/// One ZooKeeper session (re-opened after expiry if the options say so).
///
/// Every operation takes a completion token (default `dlock::default_token`,
/// so `co_await zk.get("/a")` works in an `asio::awaitable`) and owns its
/// arguments. Operations never complete inside the initiating call; they
/// complete on the handler's associated executor. Per-operation cancellation
/// (terminal and partial) abandons a sent request: the handler gets
/// `asio::error::operation_aborted` and the late reply is dropped; the server
/// may still apply it (except `create`, whose node is deleted again when its
/// reply comes). Each operation's reference says the rest.
///
/// Errors: `dlock::zk::error` (NONODE is `zk::error::no_node`, ...),
/// `dlock::error::invalid_argument` for a bad path (nothing is sent),
/// `zk::error::invalid_state` before `connect()`, `dlock::error::closed` after
/// `close()`.
///
/// Thread safety: the client runs on a strand of the executor it was given,
/// so the io_context may run on several threads. Distinct clients are
/// independent; calls into the C client are serialized process-wide. Use one
/// client object from one thread at a time; initiating from the strand
/// (`get_executor()`) is cheapest.
class client {
 public:
  using executor_type = asio::any_io_executor;  ///< the type of `get_executor()`

  /// A client for the servers `opts` names, on a strand of `executor`;
  /// nothing is sent before `connect()`.
  client(asio::any_io_executor executor, options opts);
  ~client();  ///< closes without waiting: pending operations complete with `dlock::error::closed`
  client(client&&) noexcept = default;             ///< takes over the session
  client& operator=(client&&) noexcept = delete;  ///< not assignable
  client(const client&) = delete;                 ///< not copyable
  client& operator=(const client&) = delete;      ///< not copyable

  /// The client's strand.
  executor_type get_executor() const noexcept;

  /// Opens the session; completes once it is established (or at once if it is).
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// The handler's associated executor (else the client's strand); never
  /// inside this call.
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`;
  /// the client goes on connecting.
  /// @par Errors
  /// `dlock::error::timed_out` after `options::connect_timeout` (one limit for
  /// every waiting `connect`, counted from the latest; the client keeps
  /// trying), `zk::error::auth_failed`, `zk::error::session_expired` (the
  /// session expired and `options::reopen_on_expiry` is off),
  /// `dlock::error::invalid_argument` (the C client refused `options::hosts`;
  /// `session_timeout` outside [`zk::min_session_timeout`,
  /// `zk::max_session_timeout`];
  /// `connect_timeout` not positive or beyond `dlock::max_duration`),
  /// `dlock::error::closed`.
  /// @par Lifetime
  /// Destroying the client completes it with `dlock::error::closed`.
  template <class CompletionToken = default_token>
  auto connect(CompletionToken&& token = {});

  /// Ends the session (its ephemeral nodes go at once when the server answers;
  /// a stalled server is not waited for) and fails pending operations and
  /// watches with `dlock::error::closed`.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// As `connect()`.
  /// @par Cancellation
  /// Terminal and partial end only the wait (`asio::error::operation_aborted`):
  /// the close goes on.
  /// @par Errors
  /// None: succeeds once the session is closed (at once if it is; a second
  /// close joins the first).
  /// @par Lifetime
  /// The client may be destroyed meanwhile (its destructor starts the same close).
  template <class CompletionToken = default_token>
  auto close(CompletionToken&& token = {});

  /// Creates `path` (for sequential modes, `path` is the prefix).
  ///
  /// @par Handler signature
  /// `void(error_code, created)`.
  /// @par Executor
  /// The handler's associated executor (else the client's strand); never
  /// inside this call.
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`; a
  /// node the server created anyway is deleted when that reply comes, and a
  /// sequential one again after a reconnection if the connection drops during
  /// that delete (another name may be somebody else's by then: it is deleted
  /// once). If the connection drops before the reply, the outcome is unknown
  /// and the node may stay.
  /// @par Errors
  /// `zk::error::node_exists`, `no_node` (no parent), `no_children_for_ephemerals`,
  /// `no_auth`, and those of every request: `dlock::error::invalid_argument`
  /// (bad path, nothing sent), `zk::error::invalid_state` (before `connect()`,
  /// or after an expiry without `reopen_on_expiry`), `connection_loss` (the
  /// outcome is unknown), `session_expired`, `dlock::error::closed`.
  /// @par Lifetime
  /// Arguments are moved into the operation. Destroying the client completes
  /// it (with `dlock::error::closed` unless its reply came first).
  template <class CompletionToken = default_token>
  auto create(std::string path, std::string data, create_mode mode = create_mode::persistent,
              CompletionToken&& token = {});

  /// Deletes `path` if its version matches (-1: any).
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor, Lifetime
  /// As `create()`.
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`;
  /// the delete may still be applied.
  /// @par Errors
  /// `zk::error::no_node`, `bad_version`, `not_empty`, `no_auth`, and those of
  /// every request (see `create()`).
  template <class CompletionToken = default_token>
  auto remove(std::string path, std::int32_t version = -1, CompletionToken&& token = {});

  /// Reads data and metadata.
  ///
  /// @par Handler signature
  /// `void(error_code, std::string, stat)`.
  /// @par Executor, Lifetime
  /// As `create()`.
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`.
  /// @par Errors
  /// `zk::error::no_node`, `no_auth`, and those of every request (see `create()`).
  template <detail::not_a_watch CompletionToken = default_token>
  auto get(std::string path, CompletionToken&& token = {});
  /// Same, and arms `w` for the node's next data change or deletion.
  ///
  /// @par Handler signature, Executor, Errors
  /// As `get()`. A read that fails arms nothing: `w.wait()` completes with its error.
  /// @par Cancellation
  /// As `get()`, and the watch is removed (`w.wait()` gives `operation_aborted`).
  /// @par Lifetime
  /// `w` is used when the operation starts (with the default token, when it
  /// is awaited) and may be destroyed any time after, which removes the watch.
  template <class CompletionToken = default_token>
  auto get(std::string path, watch& w, CompletionToken&& token = {});

  /// ZooKeeper's `sync`: the member this session talks to catches up with the
  /// leader first, so reads sent after it see every write committed before
  /// it (a member may otherwise serve slightly stale reads). Pipeline the
  /// read right behind it: a session's requests run in order.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor, Cancellation, Lifetime
  /// As `get()`.
  /// @par Errors
  /// Those of every request (see `create()`).
  template <class CompletionToken = default_token>
  auto sync(std::string path, CompletionToken&& token = {});

  /// Replaces the data if the version matches (-1: any).
  ///
  /// @par Handler signature
  /// `void(error_code, stat)` (the node's new metadata).
  /// @par Executor, Lifetime
  /// As `create()`.
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`;
  /// the write may still be applied.
  /// @par Errors
  /// `zk::error::no_node`, `bad_version`, `no_auth`, and those of every request
  /// (see `create()`).
  template <class CompletionToken = default_token>
  auto set(std::string path, std::string data, std::int32_t version = -1, CompletionToken&& token = {});

  /// Metadata, or `std::nullopt` if the node does not exist (not an error).
  ///
  /// @par Handler signature
  /// `void(error_code, std::optional<stat>)`.
  /// @par Executor, Cancellation, Lifetime
  /// As `get()`.
  /// @par Errors
  /// Those of every request (see `create()`).
  template <detail::not_a_watch CompletionToken = default_token>
  auto exists(std::string path, CompletionToken&& token = {});
  /// Same, and arms `w` for the node's creation, deletion or data change.
  ///
  /// @par Handler signature, Executor, Errors
  /// As `exists()`. The watch is armed on a missing node too (it fires at its
  /// creation); a request that fails arms nothing.
  /// @par Cancellation, Lifetime
  /// As `get()` with a watch.
  template <class CompletionToken = default_token>
  auto exists(std::string path, watch& w, CompletionToken&& token = {});

  /// Child names (not full paths, unsorted) and the parent's metadata.
  ///
  /// @par Handler signature
  /// `void(error_code, std::vector<std::string>, stat)`.
  /// @par Executor, Cancellation, Lifetime
  /// As `get()`.
  /// @par Errors
  /// `zk::error::no_node`, `no_auth`, and those of every request (see `create()`).
  template <detail::not_a_watch CompletionToken = default_token>
  auto get_children(std::string path, CompletionToken&& token = {});
  /// Same, and arms `w` for the next child creation or deletion (or the node's deletion).
  ///
  /// @par Handler signature, Executor, Errors
  /// As `get_children()`. A listing that fails arms nothing.
  /// @par Cancellation, Lifetime
  /// As `get()` with a watch.
  template <class CompletionToken = default_token>
  auto get_children(std::string path, watch& w, CompletionToken&& token = {});

  /// Applies `ops` atomically, in order: all of them or none (a transaction,
  /// like Curator's `transaction()` and kazoo's `transaction()`). An empty
  /// list succeeds with no results without contacting the server.
  ///
  /// @par Handler signature
  /// `void(error_code, multi_result)`.
  /// @par Executor, Lifetime
  /// As `create()`.
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`
  /// and no results; the transaction may still be applied, and nothing is
  /// undone (not even its creates, unlike `create()`).
  /// @par Errors
  /// The failing operation's (`zk::error::bad_version`, `no_node`, ...), with
  /// `multi_result::failed_op` saying which; with the default token the error
  /// throws, so pass `asio::as_tuple(asio::deferred)` to read it. A bad path
  /// (or a container create): `dlock::error::invalid_argument` with
  /// `failed_op` set, nothing sent. A request without an answer
  /// (`connection_loss`, `closed`, ...): every result has that error and
  /// `failed_op` is empty. And those of every request (see `create()`).
  template <class CompletionToken = default_token>
  auto multi(std::vector<op> ops, CompletionToken&& token = {});

  /// Completes at the next session state change with the new state (several
  /// waiters may wait at once). A change that happens after this call but
  /// before the request reaches the strand is not missed: read `state()`,
  /// then call this.
  ///
  /// @par Handler signature
  /// `void(error_code, session_state)`.
  /// @par Executor
  /// As `connect()`.
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`.
  /// @par Errors
  /// `dlock::error::closed` when started after the client closed (a close
  /// while waiting is a change: success and `session_state::closed`).
  /// @par Lifetime
  /// Destroying the client completes it with `session_state::closed`.
  template <class CompletionToken = default_token>
  auto wait_state_change(CompletionToken&& token = {});

  // --- Session facts (safe from any thread) ---
  /// The session's state now (see `wait_state_change`).
  session_state state() const noexcept;
  /// The current session's id; compare with a node's `ephemeral_owner`. 0
  /// while there is none: before the first session, and from an expiry until
  /// the next session is established.
  std::int64_t session_id() const noexcept;
  /// The current session's password (to resume it elsewhere).
  std::string session_password() const;
  /// "ip:port" of the server currently connected, empty if none.
  std::string current_server() const;
  /// The session timeout the servers granted (0 before the first session).
  std::chrono::milliseconds negotiated_session_timeout() const noexcept;
  /// The options it was made with.
  const options& get_options() const noexcept;
  /// Counters since construction.
  statistics stats() const noexcept;

 private:
  template <class Token>
  auto get_impl(std::string path, watch* w, Token&& token);
  template <class Token>
  auto exists_impl(std::string path, watch* w, Token&& token);
  template <class Token>
  auto children_impl(std::string path, watch* w, Token&& token);

  friend client detail::borrow_session(const client& owner);
  friend bool detail::session_vouched_for(const client& owner);
  struct borrowed_t {};
  client(detail::session_ptr session, borrowed_t) noexcept : impl_(std::move(session)), owner_(false) {}

  detail::session_ptr impl_;
  bool owner_ = true;  // closes the session when destroyed
};

}  // namespace dlock::zk

#include <dlock/zk/impl/client.hpp>
