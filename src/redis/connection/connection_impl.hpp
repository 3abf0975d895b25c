// The connection's internals: one socket, one reader, one writer, the
// multiplexer (commands), the lifecycle (the session), one timer for every
// command's deadline. Everything runs on the executor the user gave (a strand
// if they call from several threads).
#pragma once

#include "redis/connection/lifecycle.hpp"
#include "redis/connection/multiplexer.hpp"
#include "redis/connection/request.hpp"
#include "redis/resp/reply_parser.hpp"

#include <dlock/limits.hpp>
#include <dlock/redis/connection.hpp>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/container/small_vector.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

namespace boost::asio::ssl {
class context;
template <typename Stream>
class stream;
}  // namespace boost::asio::ssl

namespace dlock::redis::detail {

using tls_stream = asio::ssl::stream<asio::ip::tcp::socket&>;
class sentinel_watch;

/// Told when the connection's master changed (a failover): the locks
/// granted on the old master are lost. Called on the connection's
/// executor, before any command reaches the new master.
class master_watcher {
 public:
  virtual ~master_watcher() = default;
  virtual void on_master_changed(std::uint64_t epoch) = 0;
};

/// The connection's speed tricks, on unless built with
/// -DDLOCK_SPEED_TRICKS=OFF: writes left with another connection's reply
/// hand-out (write_plan.hpp) and one staging buffer per thread
/// (connection.cpp). Off, every connection posts and stages its own writes.
#ifdef DLOCK_NO_SPEED_TRICKS
inline constexpr bool speed_tricks = false;
#else
inline constexpr bool speed_tricks = true;
#endif

// A command already encoded (the public connection's exec and eval).
struct encoded_command {
  std::string wire;  // EVALSHA form for a script
  std::shared_ptr<const redis::script::data> script;
  std::size_t tail_offset = 0;
  std::uint32_t replies = 1;  // more for a MULTI ... EXEC block (see request)
};
std::pair<std::string, std::size_t> evalsha_wire(const script::data& s, const command& tail);

/// Room for a lock command with a key of a hundred bytes or so, inline.
using command_buffer = boost::container::small_vector<char, 192>;

/// One command a Redlock fan-out sends to every master, encoded once into
/// the fan-out itself (no allocation for a lock's usual commands). Its
/// requests borrow its bytes while they are owed.
struct inline_command {
  std::shared_ptr<const redis::script::data> script;
  std::uint32_t tail_offset = 0;  // where numkeys starts, for the EVAL form
  std::uint32_t replies = 1;      // more than one for a MULTI ... EXEC block
  bool gather = false;            // a block answered with all its replies (see request::gather)
  // Last, so that a short command and the fields above share cache lines.
  command_buffer wire;  // EVALSHA form for a script

  void set(std::initializer_list<std::string_view> arguments);
  /// Several commands sent as one (a MULTI ... EXEC block): its last reply
  /// is the answer, or with `gather` all of them as one array.
  void set_block(std::initializer_list<std::initializer_list<std::string_view>> commands, bool gather = false);
  void set(const redis::script& s, std::initializer_list<std::string_view> keys,
           std::initializer_list<std::string_view> args);
  /// One more command after what was set; the answer is then every reply,
  /// gathered (SET then WAIT: both answers matter).
  void then(std::initializer_list<std::string_view> arguments);
  bool empty() const noexcept { return wire.empty(); }
  std::string_view bytes() const noexcept { return {wire.data(), wire.size()}; }
};

/// The clock reading of the reply hand-out running on this thread, if any,
/// else now(): a time early by as long as the hand-out has run, never late.
/// Only for what early makes safer and a long hand-out cannot starve: a
/// Redlock round's start (validity runs from it) and command deadlines
/// (command_timeout is long). Not for a per-master timeout or a wait limit.
clock::time_point recent_now() noexcept;

// For dlock's own locks, which call from the connection's executor with
// continuations that may run in place (see completion_target).
struct connection_access {
  // The internals, shared: a lock keeps them, not the handle, so a handle
  // destroyed first leaves it a closed connection rather than freed memory.
  static std::shared_ptr<connection_impl> impl(connection& c) { return c.impl_; }
  // For Redlock's fan-outs, which abandon commands themselves (no
  // cancellation slot). `on_executor`: the caller runs on the connection's
  // executor and so does the sink, which then gets replies in place. Returns
  // a handle for abandon(). `cmd` belongs to `sink` and must not change
  // while the request is owed: the request borrows its bytes.
  static request_handle send(const std::shared_ptr<connection_impl>& c, const inline_command& cmd,
                             std::shared_ptr<reply_sink> sink, std::size_t index, bool on_executor);
  // The request gets operation_aborted unless it has completed; the reply,
  // if it comes, is read and dropped.
  static void abandon(const std::shared_ptr<connection_impl>& c, request_handle r);
  // connection::wait_for, from any thread.
  static void wait_for(const std::shared_ptr<connection_impl>& c, connection_state target, handler_type0 handler);
};

// Why a connection cannot work with `o` (empty when it can): refused by
// connect() with dlock::error::invalid_argument, nothing sent.
inline std::string_view options_invalid_reason(const options& o) noexcept {
  using std::chrono::milliseconds;
  // Beyond max_duration a deadline (now + duration, in nanoseconds) overflows.
  if (o.connect_timeout > dlock::max_duration || o.command_timeout > dlock::max_duration ||
      o.reconnect_min > dlock::max_duration || o.reconnect_max > dlock::max_duration)
    return "durations must not exceed dlock::max_duration (100 years)";
  if (o.connect_timeout <= milliseconds::zero()) return "connect_timeout must be positive";
  if (o.command_timeout < milliseconds::zero()) return "command_timeout must not be negative (zero: none)";
  if (o.database < 0) return "database must not be negative";
  // The resolver would take an empty host for the loopback (with Sentinel it is not used).
  if (o.host.empty() && o.sentinel.master_name.empty()) return "host must not be empty";
  if (o.reconnect && o.reconnect_min <= std::chrono::milliseconds::zero())
    return "reconnect_min must be positive (reconnecting would spin)";
  if (o.reconnect && o.reconnect_max < o.reconnect_min) return "reconnect_max must not be below reconnect_min";
  if (!o.sentinel.master_name.empty() && o.sentinel.sentinels.empty())
    return "sentinel.sentinels must name at least one sentinel";
  for (const auto& s : o.sentinel.sentinels)
    if (s.host.empty() || s.port == 0) return "every sentinel needs a host and a port";
  return {};
}

// The glue: owns the socket, the TLS stream and the timers, feeds events to
// the two machines (multiplexer: commands; lifecycle: the session) and
// performs what they return. Decisions live in the machines.
class connection_impl : public reply_sink, public std::enable_shared_from_this<connection_impl> {
 public:
  connection_impl(asio::any_io_executor executor, options opts);
  ~connection_impl() override;

  asio::any_io_executor executor() const { return executor_; }
  const options& opts() const { return opts_; }
  connection_state state() const { return state_; }
  connection_stats stats() const {
    auto out = stats_;
    out.commands = mux_.commands_written();
    out.replies = mux_.replies_read();
    out.pending = mux_.pending();
    return out;
  }

  // Called on the connection's executor.
  void enqueue(request_ptr r);
  request_ptr make_request() { return mux_.make_request(); }
  void bind_cancellation(const request_ptr& r);  // any thread, at initiation
  struct waiter {
    dlock::detail::op_base<void(error_code)> op;
    connection_state target;
    bool connect;  // completes on the next attempt's outcome
  };
  using waiter_ptr = std::shared_ptr<waiter>;
  /// Any thread, in the initiating function: the handler's slot is hooked
  /// now, so a cancellation emitted before the wait reaches the executor is
  /// not lost (the wait then finds itself done).
  waiter_ptr new_waiter(connection_state target, bool connect, handler_type0 handler);
  void connect(waiter_ptr w);
  void wait_for(waiter_ptr w);
  void connect(handler_type0 handler) { connect(new_waiter(connection_state::connected, true, std::move(handler))); }
  void wait_for(connection_state target, handler_type0 handler) {
    wait_for(new_waiter(target, false, std::move(handler)));
  }
  void close();

  // ---- the master, and failovers ----
  /// Grows each time the master changed; a lock granted under one epoch is
  /// lost when it grows. Any thread.
  std::uint64_t master_epoch() const noexcept { return master_epoch_.load(std::memory_order_acquire); }
  /// Adds a watcher (kept weakly, for as long as it lives). Any thread.
  void watch_master(std::weak_ptr<master_watcher> w);
  const server_address& current_master() const noexcept { return life_.address(); }
  // From the sentinel watch.
  void sentinel_discovered(std::uint64_t attempt, error_code ec, const server_address& master);
  void sentinel_switched(const server_address& master);
  /// For a connection subscribed to a channel: its messages go to `listener`.
  void set_push_listener(std::function<void(const reply&)> listener) { push_listener_ = std::move(listener); }

  // The greeting's replies (the connection is their sink; the index is the attempt).
  const asio::any_io_executor& sink_executor() const noexcept override { return executor_; }
  void on_reply(std::size_t attempt, error_code ec, const reply& answer) override;

 private:
  friend struct connection_access;

  // commands (connection.cpp)
  clock::time_point deadline_base() const;
  void schedule_write();
  void start_write();
  void do_write();
  void wrote(error_code ec, std::size_t n);
  void start_read();
  class read_keeper;
  void drop_pending();
  void on_read(std::uint64_t session, error_code ec, std::size_t n);
  class hand_out_scope;
  void hand_out_read(std::uint64_t session, clock::time_point read_at);
  void resume_hand_out_later(std::uint64_t session) noexcept;
  void resume_hand_out(std::uint64_t session);
  error_code hand_out_replies(std::uint64_t session);
  void hand_out(reply&& r);
  void complete(request& r, error_code ec, reply&& value, completion how);
  void abandon(const request_handle& handle);
  void arm_deadline_timer();
  void check_deadlines();
  void lose(error_code why);
  void tear_down(error_code pending_error);

  // the session (connection_session.cpp)
  void perform(lifecycle::action a);
  void begin_attempt();
  void resolve();
  void arm_connect_timer();
  void start_connect();
  error_code prepare_socket();
  void start_tls();
  void open_session();
  void send_greeting(std::size_t index);
  void after_failure(const lifecycle::action& a);
  void publish(error_code why = {});  // `why`: what dropped the connection
  void complete_waiter(std::list<waiter_ptr>::iterator it, error_code ec);
  void notify_connect(error_code ec);
  void announce_master_change();

  asio::any_io_executor executor_;
  options opts_;
  multiplexer mux_;
  lifecycle life_;
  asio::ip::tcp::resolver resolver_;
  std::vector<asio::ip::tcp::endpoint> endpoints_;  // the last attempt's, resolved or given
  asio::ip::tcp::socket socket_;
  std::unique_ptr<asio::ssl::context> tls_context_;  // made at the first TLS connect
  // The TLS session over socket_, new for every connection. Operations in
  // flight hold it too: they may outlive a lost session.
  std::shared_ptr<tls_stream> tls_;
  asio::steady_timer deadline_timer_;
  asio::steady_timer backoff_timer_;
  asio::steady_timer connect_timer_;
  reply_parser parser_;
  std::vector<request_ptr> settled_;  // expired or failed by a reset, to complete (reused)
  std::array<char, 16384> in_{};
  std::list<waiter_ptr> waiters_;
  connection_stats stats_;  // writes and connects (the multiplexer counts the rest)
  connection_state state_ = connection_state::disconnected;  // as last published
  std::uint64_t session_ = 0;  // bumped per session and at its end: late callbacks of old ones are ignored
  write_plan plan_{speed_tricks};
  std::string own_staging_;  // without the speed trick: the write's bytes, staged
  // Other connections on this executor given commands while this one handed
  // out replies: written when the hand-out ends (reused).
  std::vector<std::pair<std::shared_ptr<connection_impl>, std::uint64_t>> deferred_writes_;
  void write_deferred();
  std::shared_ptr<sentinel_watch> sentinel_;  // with Sentinel discovery
  std::mutex master_watchers_mutex_;  // locks on other threads add themselves
  std::vector<std::weak_ptr<master_watcher>> master_watchers_;
  std::size_t pruned_size_ = 0;  // master_watchers_' size after the last prune
  std::atomic<std::uint64_t> master_epoch_{0};  // life_'s, for other threads
  std::function<void(const reply&)> push_listener_;  // a sentinel link's subscription
};

}  // namespace dlock::redis::detail
