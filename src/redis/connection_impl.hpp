// The connection's internals: one socket, one reader, one writer, the
// pipelining queue, one timer for every command's deadline. Everything runs on
// the executor the user gave (a strand if they call from several threads).
#pragma once

#include "reply_parser.hpp"

#include <dlock/redis/connection.hpp>
#include <dlock/redis/detail/request_queue.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <chrono>
#include <list>
#include <memory>
#include <optional>
#include <random>
#include <string_view>

namespace boost::asio::ssl {
class context;
template <typename Stream>
class stream;
}  // namespace boost::asio::ssl

namespace dlock::redis::detail {

using tls_stream = asio::ssl::stream<asio::ip::tcp::socket&>;
using clock = std::chrono::steady_clock;
using handler_type = asio::any_completion_handler<void(error_code, reply)>;
using handler_type0 = asio::any_completion_handler<void(error_code)>;

// A consumer of replies inside dlock (Redlock's fan-out): completed without
// a type-erased handler to allocate per command.
class reply_sink {
 public:
  virtual ~reply_sink() = default;
  virtual const asio::any_io_executor& sink_executor() const noexcept = 0;
  virtual void on_reply(std::size_t index, error_code ec, reply answer) = 0;
};

struct request {
  std::string wire;       // RESP bytes (EVALSHA form for scripts)
  std::string eval_wire;  // EVAL form, built when the script is not known loaded
  std::shared_ptr<const redis::script::data> script;
  std::size_t tail_offset = 0;  // where numkeys starts in `wire`
  // Empty once completed: the reply is then dropped. An optional because
  // any_completion_handler's assignment is broken in Asio 1.81.
  std::optional<handler_type> handler;
  // Or, instead of a handler, the sink and the index it gets back.
  std::shared_ptr<reply_sink> sink;
  std::size_t sink_index = 0;
  asio::cancellation_slot slot;
  clock::time_point deadline = clock::time_point::max();
  bool internal = false;  // handshake command, allowed while connecting
  bool use_eval = false;  // sent (or to be sent) as EVAL
  // Invoked in place when its reply is read, not dispatched: a handler
  // whose executor is the connection's (see dlock::detail::runs_on), or a
  // continuation of dlock's own locks, which completes onward itself.
  bool in_place = false;
  std::uint32_t generation = 0;  // bumped when reused: a late cancellation of its last use is ignored

  bool live() const noexcept { return handler || sink; }
};
using request_ptr = std::shared_ptr<request>;

// A request as it was when sent: it may since have completed and been reused.
struct request_handle {
  std::weak_ptr<detail::request> sent;
  std::uint32_t generation = 0;
};

// A command already encoded, for sending one command to many connections.
struct encoded_command {
  std::string wire;  // EVALSHA form for a script
  std::shared_ptr<const redis::script::data> script;
  std::size_t tail_offset = 0;
};
encoded_command encode(command cmd);
encoded_command encode_eval(const script& s, const command& tail);
std::pair<std::string, std::size_t> evalsha_wire(const script::data& s, const command& tail);

// For dlock's own locks, which call from the connection's executor with
// continuations that may run in place (see request::in_place).
struct connection_access {
  static void exec(connection& c, command cmd, handler_type handler) {
    submit(*c.impl_, encode(std::move(cmd)), std::move(handler));
  }
  static void eval(connection& c, const script& s, const command& tail, handler_type handler) {
    submit(*c.impl_, encode_eval(s, tail), std::move(handler));
  }
  // The internals, shared: a lock keeps them, not the handle, so a handle
  // destroyed first leaves it a closed connection rather than freed memory.
  static std::shared_ptr<connection_impl> impl(connection& c) { return c.impl_; }
  // From the connection's executor, with a handler that may run in place.
  static void submit(connection_impl& impl, encoded_command cmd, handler_type handler);
  // For Redlock's fan-outs, which abandon commands themselves (no
  // cancellation slot). `on_executor`: the caller runs on the connection's
  // executor and so does the sink, which then gets replies in place. Returns
  // a handle for abandon().
  static request_handle send(connection& c, const encoded_command& cmd, std::shared_ptr<reply_sink> sink,
                             std::size_t index, bool on_executor);
  // The request gets operation_aborted unless it has completed; the reply,
  // if it comes, is read and dropped.
  static void abandon(connection& c, request_handle r);
};

// Why a connection cannot work with `o` (empty when it can): refused by
// connect() with dlock::error::invalid_argument, nothing sent.
inline std::string_view options_invalid_reason(const options& o) noexcept {
  if (o.reconnect && o.reconnect_min <= std::chrono::milliseconds::zero())
    return "reconnect_min must be positive (reconnecting would spin)";
  if (o.reconnect && o.reconnect_max < o.reconnect_min) return "reconnect_max must not be below reconnect_min";
  return {};
}

class connection_impl : public std::enable_shared_from_this<connection_impl> {
 public:
  connection_impl(asio::any_io_executor executor, options opts);
  ~connection_impl();

  asio::any_io_executor executor() const { return executor_; }
  const options& opts() const { return opts_; }
  connection_state state() const { return state_; }
  connection_stats stats() const {
    auto out = stats_;
    out.pending = queue_.size();
    return out;
  }

  // Called on the connection's executor.
  void enqueue(request_ptr r);
  // On the executor: a request from the spares (its buffers reused), or new.
  request_ptr make_request();
  void bind_cancellation(const request_ptr& r);  // any thread, at initiation
  void connect(handler_type0 handler);
  void wait_for(connection_state target, handler_type0 handler);
  void close();

 private:
  struct waiter {
    handler_type0 handler;
    asio::cancellation_slot slot;
    connection_state target;
    bool connect;  // completes on the next attempt's outcome
  };

  asio::awaitable<void> run();
  asio::awaitable<error_code> connect_once();
  asio::awaitable<error_code> tls_handshake();
  asio::awaitable<error_code> handshake();
  asio::awaitable<error_code> internal_exec(command cmd);
  void schedule_write();
  void start_write();
  void write_rest();
  void do_write();
  void on_write(std::uint64_t session, error_code ec, std::size_t n);
  void wrote(error_code ec, std::size_t n);
  void start_read();
  void on_read(std::uint64_t session, error_code ec, std::size_t n);
  error_code dispatch_replies(std::uint64_t session);
  void on_reply(reply r);
  friend struct connection_access;
  enum class completion { post, dispatch };
  void finish(request& r, error_code ec, reply value, completion how, bool from_slot = false);
  void deliver_to_sink(request& r, error_code ec, reply value, completion how);
  void recycle(request_ptr r);
  void choose_script_form(request& r);
  bool script_loaded(const script::data& s) const noexcept;
  bool retry_as_eval(request_ptr& r);
  void lose(error_code why);
  void arm_deadline_timer();
  void check_deadlines();
  void set_state(connection_state s);
  void add_waiter(connection_state target, bool connect, handler_type0 handler);
  void complete_waiter(std::list<waiter>::iterator it, error_code ec, bool from_slot = false);
  void notify_connect(error_code ec);
  clock::duration next_backoff();

  asio::any_io_executor executor_;
  options opts_;
  asio::ip::tcp::resolver resolver_;
  asio::ip::tcp::socket socket_;
  std::unique_ptr<asio::ssl::context> tls_context_;  // made at the first TLS connect
  // The TLS session over socket_, new for every connection. Operations in
  // flight hold it too: they may outlive a lost session.
  std::shared_ptr<tls_stream> tls_;
  asio::steady_timer deadline_timer_;
  asio::steady_timer session_end_;  // a condvar: cancelled when the session ends
  asio::steady_timer backoff_timer_;
  asio::steady_timer connect_timer_;
  reply_parser parser_;
  request_queue<request_ptr> queue_;
  std::vector<request_ptr> batch_;
  std::vector<request_ptr> spare_;  // answered requests, kept for reuse
  // Scripts sent as EVAL on this session, so loaded in the server's cache
  // unless it was flushed since: their next uses go as EVALSHA. Forgotten
  // on a reset (the next session may reach a restarted server) and on a
  // NOSCRIPT. A few entries (dlock's locks use two or three scripts).
  std::vector<std::shared_ptr<const script::data>> loaded_scripts_;
  std::string out_;  // the bytes of the write in flight
  std::size_t out_written_ = 0;
  std::array<char, 16384> in_{};
  std::list<waiter> waiters_;
  std::minstd_rand random_;
  clock::duration backoff_{};
  connection_stats stats_;
  connection_state state_ = connection_state::disconnected;
  std::uint64_t session_ = 0;  // bumped per session: late callbacks of old ones are ignored
  std::uint64_t attempt_ = 0;
  bool session_open_ = false;
  bool writing_ = false;
  bool write_scheduled_ = false;
  // Set while on_read hands out replies: commands their continuations issue
  // wait for the end of the read and leave together in one write.
  bool dispatching_replies_ = false;
  clock::time_point read_at_{};  // when that read completed
  bool write_wanted_ = false;
  bool running_ = false;
  bool closed_ = false;
  bool connect_timed_out_ = false;
};

}  // namespace dlock::redis::detail
