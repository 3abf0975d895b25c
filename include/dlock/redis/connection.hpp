/// @file
/// A Redis connection shared by many coroutines, with automatic pipelining.
#pragma once

#include <dlock/config.hpp>
#include <dlock/detail/in_place.hpp>
#include <dlock/detail/initiation.hpp>
#include <dlock/redis/command.hpp>
#include <dlock/redis/error.hpp>
#include <dlock/redis/options.hpp>
#include <dlock/redis/reply.hpp>
#include <dlock/redis/script.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::redis {

namespace detail {
class connection_impl;
struct connection_access;  // dlock's own locks: continuations run without an extra hop
}

/// Where a `redis::connection` is in its life.
enum class connection_state : std::uint8_t {
  disconnected,  ///< never connected, or waiting for the next reconnect attempt
  connecting,    ///< resolving, connecting or in the handshake (AUTH, SELECT, SETNAME)
  connected,     ///< commands are sent
  closed,        ///< close() was called (or the loss was final): nothing more happens
};

/// Counters for tests and benchmarks.
struct connection_stats {
  std::uint64_t writes = 0;    ///< completed write_some calls (each one syscall)
  std::uint64_t commands = 0;  ///< commands written
  std::uint64_t replies = 0;   ///< replies read
  std::uint64_t connects = 0;  ///< successful connects (handshake done)
  std::uint64_t pending = 0;   ///< commands now waiting to be written or for their reply
};

/// A Redis connection shared by many coroutines, with automatic pipelining.
///
/// Commands issued by any number of coroutines are queued; while one write is
/// in flight the next ones wait and go out together in the following write.
/// Replies are matched to commands in order by one reader loop, one for one,
/// always: commands Redis does not answer exactly once (an empty command,
/// the SUBSCRIBE family, MONITOR, CLIENT REPLY, HELLO 3, ...: see `exec`)
/// are refused, and bytes that answer no command (an extra reply, a RESP3
/// push, anything that is not RESP2) reset the connection.
///
/// Once `connect()` is called the connection stays up by itself: when it
/// breaks, every pending command fails at once and it reconnects with
/// backoff until `close()`. Commands issued while it is not connected fail
/// at once with `not_connected`. A command failed by such a reset (socket
/// error, unexpected bytes, silent server) gets `connection_lost`, whatever
/// the cause: it may or may not have run. Only `close()` gives
/// `dlock::error::closed` instead.
///
/// A silent server is a dead one: when a command's timeout passes and
/// nothing at all was read since it was issued (a stopped server, or a
/// network black hole that sends no RST), it gets `timed_out` and the
/// connection resets. So a command that blocks on the server for longer
/// than `command_timeout` (BLPOP, WAIT, XREAD BLOCK) resets an otherwise idle
/// connection: give such commands a connection of their own with a longer
/// `command_timeout`, or none.
///
/// With g++ 12, keep braced lists out of co_await expressions: write
/// `auto op = conn.exec({"GET", k}); co_await std::move(op);` or
/// `co_await conn.exec(command("GET", k));`.
///
/// Thread safety, as for Asio's own sockets: the connection and the locks on
/// it run on the executor they were given and are not thread-safe. Use them
/// from one thread, or give the connection a strand when the io_context runs
/// on several threads (the locks then run on that strand too). Completions
/// run on the handler's associated executor (by default the connection's); a
/// reply may resume its waiter in place when that executor is the one
/// running. Each operation's reference says what its cancellation does; emit
/// cancellation from the thread running the connection.
///
/// The object is a handle: pending operations keep the internals alive;
/// destroying the handle closes the connection.
class connection {
 public:
  /// A connection to the server `opts` names, running on `executor`; nothing
  /// is sent before `connect()`.
  connection(asio::any_io_executor executor, options opts);
  ~connection();  ///< closes the connection (see `close()`)
  connection(connection&&) noexcept;             ///< takes over `other`'s connection
  connection& operator=(connection&&) noexcept;  ///< closes this one, takes over `other`'s

  /// The executor the connection runs on (the one it was given).
  asio::any_io_executor get_executor() const noexcept;
  const options& get_options() const noexcept;  ///< the options it was given
  connection_state state() const noexcept;      ///< where the connection is now
  connection_stats stats() const noexcept;      ///< counters since construction

  /// Starts the connection (once; later calls join it) and completes when it
  /// is connected, or with the error of the first attempt that fails;
  /// reconnect attempts go on in the background.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor
  /// The handler's associated executor (else the connection's); posted,
  /// never inside this call.
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`;
  /// the connection goes on connecting.
  /// @par Errors
  /// The failed attempt's: `asio::error::connection_refused` (or another
  /// resolve, connect or TLS error), `redis::error::timed_out`
  /// (`options::connect_timeout`), `auth_failed` (AUTH refused), ...;
  /// `dlock::error::invalid_argument` (bad reconnect options, nothing done),
  /// `dlock::error::closed`.
  /// @par Lifetime
  /// The connection must be alive when the operation starts (with the default
  /// token, when it is awaited); destroying it later gives `dlock::error::closed`.
  template <class Token = default_token>
  auto connect(Token&& token = {}) {
    return dlock::detail::async_initiate_on<Token, void(error_code)>(*this,
        [this](auto handler) { start_connect(handler_type0(std::move(handler))); }, token);
  }

  /// Completes when the state is `s` (at once if it is).
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor, Lifetime
  /// As `connect()`.
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`.
  /// @par Errors
  /// `dlock::error::closed` if the connection closes first (or was closed).
  template <class Token = default_token>
  auto wait_for(connection_state s, Token&& token = {}) {
    return dlock::detail::async_initiate_on<Token, void(error_code)>(*this,
        [this](auto handler, connection_state target) {
          start_wait(target, handler_type0(std::move(handler)));
        },
        token, s);
  }

  /// Sends one command.
  ///
  /// @par Handler signature
  /// `void(error_code, reply)`.
  /// @par Executor
  /// The handler's associated executor (else the connection's); never inside
  /// this call. When that executor is the connection's, the reply resumes the
  /// handler in place.
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`; a
  /// command not yet written is never sent, else it runs and its reply is
  /// read and dropped.
  /// @par Errors
  /// An error reply gives a `redis::error` (`server_error`, `no_script`,
  /// `wrong_type`, `auth_failed`, `busy`) and the reply holding the server's
  /// message; `redis::error::not_connected` (issued while down),
  /// `connection_lost` (a reset: it may or may not have run), `timed_out`
  /// (`options::command_timeout`), `dlock::error::closed`,
  /// `dlock::error::invalid_argument` (the commands below).
  /// @par Lifetime
  /// The command is moved into the operation. The connection must be alive
  /// when the operation starts; destroying it later gives `dlock::error::closed`.
  ///
  /// Refused at once with `dlock::error::invalid_argument`, nothing sent,
  /// because they would shift every later reply on the connection: the empty
  /// command; SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, UNSUBSCRIBE, PUNSUBSCRIBE,
  /// SUNSUBSCRIBE; MONITOR; CLIENT REPLY; HELLO with a protocol other than 2;
  /// SYNC, PSYNC, REPLCONF; RESET (it undoes AUTH, SELECT and SETNAME);
  /// SELECT (the locks on the connection would move to another database, and
  /// back at the next reconnect: set `options::database` instead); MULTI
  /// (the other callers' commands would be queued into the transaction: use
  /// a script). QUIT is allowed: the connection then reconnects.
  template <class Token = default_token>
  auto exec(command cmd, Token&& token = {}) {
    return dlock::detail::async_initiate_erased<Token, void(error_code, reply)>(*this,
        [this](handler_type h, bool in_place, command c) {
          start_exec(std::move(c).take_encoded(), nullptr, 0, std::move(h), in_place);
        },
        token, std::move(cmd));
  }
  /// The same with the arguments as strings (reference as the first `exec`).
  template <class Args, class Token = default_token>
    requires std::same_as<std::decay_t<Args>, std::vector<std::string>>
  auto exec(const Args& args, Token&& token = {}) {
    return exec(command(args), std::forward<Token>(token));
  }

  /// Runs `s` with `keys` then `args`, never out of order with the commands
  /// issued after it. The first use of a script on a connection (and again
  /// after each reconnect) goes as EVAL, which also loads it into the
  /// server's cache; later uses go as EVALSHA. If an EVALSHA still gets
  /// NOSCRIPT (the cache was flushed since: SCRIPT FLUSH, a failover), it is
  /// sent again as EVAL when nothing was written after it; otherwise it
  /// completes with `redis::error::script_not_run` (it did not run; issue it
  /// again) and the next uses of every script go as EVAL.
  ///
  /// @par Handler signature
  /// `void(error_code, reply)`.
  /// @par Executor, Cancellation
  /// As `exec()`.
  /// @par Errors
  /// `redis::error::script_not_run` (above), the script's error reply
  /// (`server_error` with the message), and those of `exec()`.
  /// @par Lifetime
  /// As `exec()`; the script's text is shared, so `s` may go after the call.
  template <class Token = default_token>
  auto eval(const script& s, std::initializer_list<std::string_view> keys,
            std::initializer_list<std::string_view> args, Token&& token = {}) {
    return eval(s, eval_tail(keys, args), std::forward<Token>(token));
  }
  /// The same with keys and arguments as vectors (reference as the first `eval`).
  template <class Token = default_token>
  auto eval(const script& s, const std::vector<std::string>& keys,
            const std::vector<std::string>& args, Token&& token = {}) {
    return eval(s, eval_tail(keys, args), std::forward<Token>(token));
  }
  /// `tail` = numkeys, keys and args already encoded (see `eval_tail`);
  /// reference as the first `eval`.
  template <class Token = default_token>
  auto eval(const script& s, command tail, Token&& token = {}) {
    return dlock::detail::async_initiate_erased<Token, void(error_code, reply)>(*this,
        [this](handler_type h, bool in_place, std::shared_ptr<const script::data> sd, command t) {
          start_eval(std::move(sd), t, std::move(h), in_place);
        },
        token, s.shared(), std::move(tail));
  }

  /// Encodes numkeys, `keys` and `args` for `eval(s, tail)`: build it once,
  /// reuse it for many calls.
  template <class Strings>
  static command eval_tail(const Strings& keys, const Strings& args) {
    command c;
    c.arg(keys.size());
    for (const auto& k : keys) c.arg(std::string_view(k));
    for (const auto& a : args) c.arg(std::string_view(a));
    return c;
  }
  /// The same from braced lists.
  static command eval_tail(std::initializer_list<std::string_view> keys,
                           std::initializer_list<std::string_view> args) {
    command c;
    c.arg(keys.size());
    for (auto k : keys) c.arg(k);
    for (auto a : args) c.arg(a);
    return c;
  }

  /// Stops reconnecting, fails pending commands and `connect`/`wait_for`
  /// waiters with `dlock::error::closed` (a `wait_for(closed)` succeeds),
  /// closes the socket. Idempotent; not an asynchronous operation: it runs at
  /// once when called on the connection's executor, else soon after there.
  void close();

 private:
  friend struct detail::connection_access;
  using handler_type = asio::any_completion_handler<void(error_code, reply)>;
  using handler_type0 = asio::any_completion_handler<void(error_code)>;

  void start_connect(handler_type0 handler);
  void start_wait(connection_state target, handler_type0 handler);
  // `in_place`: the handler may run in place when its reply is read.
  void start_exec(std::string wire, std::shared_ptr<const script::data> fallback,
                  std::size_t tail_offset, handler_type handler, bool in_place);
  void start_eval(std::shared_ptr<const script::data> s, const command& tail, handler_type handler,
                  bool in_place);

  std::shared_ptr<detail::connection_impl> impl_;
};

}  // namespace dlock::redis
