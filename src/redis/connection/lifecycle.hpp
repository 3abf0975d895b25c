// The life of a Redis connection, I/O-free: each attempt (with Sentinel:
// first asks the sentinels where the master is, then) resolves, connects,
// does the TLS handshake (if enabled) and the greeting (AUTH, SELECT, CLIENT
// SETNAME, one at a time); then it is connected until the session is lost;
// a failed attempt or a loss waits a backoff and tries again (or closes, with
// `reconnect` off); close() ends it all. With Sentinel the greeting ends
// with INFO replication: a server that is not a master fails the attempt,
// and one with another replication history than the last is a new master.
// A new master (that, a `+switch-master`, a READONLY answer) bumps the
// master epoch: the locks granted before it are lost. Every event returns the action the
// glue (connection.cpp) performs next. Events from an earlier attempt, or
// arriving in another phase (a late completion of a cancelled operation),
// return `none`.
#pragma once

#include <dlock/error.hpp>
#include <dlock/redis/command.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/error.hpp>
#include <dlock/redis/options.hpp>
#include <dlock/redis/reply.hpp>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace dlock::redis::detail {

/// The greeting commands `o` asks for, in order (AUTH, SELECT, CLIENT
/// SETNAME; with Sentinel, INFO replication last).
std::vector<command> greeting(const options& o);

class lifecycle {
 public:
  using duration = std::chrono::steady_clock::duration;
  enum class phase : std::uint8_t {
    idle,  // connect() not called yet
    discovering,  // asking the sentinels for the master
    resolving,
    connecting,
    tls_handshake,
    greeting,
    connected,
    backoff,  // after a failure or a loss, until the next attempt
    closed,
  };

  struct action {
    enum class kind : std::uint8_t {
      none,
      discover,       // a new attempt, with Sentinel: publish `connecting`, arm the connect timer, ask the sentinels
      resolve,        // a new attempt: publish `connecting`, arm the connect timer, resolve the host
      connect,        // TCP connect to what was resolved (then set the socket options)
      tls_handshake,  // over the connected socket
      greet,          // send greeting command `index`
      up,             // the session is usable: connect() waiters succeed, publish `connected`
      attempt_failed, // tear the attempt down; connect() waiters get `error`; then backoff or close
      lost,           // the connected session was lost: tear it down; then backoff or close
      retry_now,      // during a backoff: end it now (on_backoff_done())
    } what = kind::none;
    // greet and up: the session opens now (start reading; commands are
    // queued from here on).
    bool open_session = false;
    // resolve: it begins the attempt (no discovery came first): publish
    // `connecting` and arm the connect timer.
    bool begins_attempt = false;
    std::size_t index = 0;  // greet
    error_code error;       // attempt_failed: what connect() waiters get; lost: why
    // attempt_failed and lost: true: publish `disconnected` and call
    // on_backoff_done() after `backoff`; false (`reconnect` off): close.
    bool retry = false;
    duration backoff{};
    // up, lost, attempt_failed and none: the master changed (master_epoch()
    // grew): every lock granted on the old one is lost, before anything else.
    bool master_changed = false;
  };

  lifecycle(const options& o, std::uint32_t seed);

  phase current() const noexcept { return phase_; }
  /// The state users see.
  connection_state state() const noexcept;
  /// The current attempt's number (events carry it back).
  std::uint64_t attempt() const noexcept { return attempt_; }
  /// Where the attempts go: options' host and port, or the master the
  /// sentinels named last.
  const server_address& address() const noexcept { return address_; }
  /// Grows each time the master changes (a failover seen).
  std::uint64_t master_epoch() const noexcept { return epoch_; }
  bool uses_sentinel() const noexcept { return sentinel_; }
  /// The encoded greeting command `index`.
  const std::string& greeting_command(std::size_t index) const { return greeting_[index]; }
  /// Why a command cannot be queued now (empty: it can). The greeting's own
  /// commands (`internal`) go while the greeting runs, the rest once connected.
  error_code refusal(bool internal) const noexcept {
    if (phase_ == phase::connected || (internal && phase_ == phase::greeting)) return {};
    if (phase_ == phase::closed) return dlock::error::closed;
    return error::not_connected;
  }

  /// connect(): the first attempt (`resolve`), or `none` once started.
  action start();
  /// The sentinels named the master (`ec` empty), or could not.
  action on_discovered(std::uint64_t attempt, error_code ec, const server_address& master);
  action on_resolved(std::uint64_t attempt, error_code ec);
  action on_connected(std::uint64_t attempt, error_code ec);
  action on_tls_handshake(std::uint64_t attempt, error_code ec);
  action on_greeting_reply(std::uint64_t attempt, error_code ec, const reply& answer = {});
  action on_connect_timeout(std::uint64_t attempt);
  /// The open session broke: a socket error, bytes answering nothing
  /// (protocol_error), a silent server (timed_out).
  action on_lost(error_code why);
  action on_backoff_done();
  /// A sentinel announced that `master` replaced the master: the session
  /// (or attempt) ends with failed_over and the next attempt goes there at once.
  action on_switch_master(const server_address& master);
  /// A command got READONLY: the server was demoted. The session ends
  /// (with Sentinel, to find the new master; without, to try again).
  action on_read_only();
  /// False when already closed.
  bool close() noexcept;

 private:
  bool at(phase p, std::uint64_t attempt) const noexcept { return phase_ == p && attempt_ == attempt; }
  bool attempting(std::uint64_t attempt) const noexcept;
  action open_session();
  action greet_next();
  action fail(action::kind what, error_code ec);
  action check_role(const reply& info);
  void new_master() noexcept { ++epoch_; }
  duration next_backoff();

  std::vector<std::string> greeting_;
  server_address address_;
  bool sentinel_;
  bool switched_ = false;  // the next attempt goes to address_ without asking the sentinels
  std::string replid_;     // the master's replication history, as last seen
  std::uint64_t epoch_ = 0;
  bool tls_;
  bool reconnect_;
  std::chrono::milliseconds reconnect_min_;
  std::chrono::milliseconds reconnect_max_;
  phase phase_ = phase::idle;
  std::uint64_t attempt_ = 0;
  std::size_t greeted_ = 0;  // greeting commands answered in this attempt
  duration backoff_{};
  std::minstd_rand random_;
};

}  // namespace dlock::redis::detail
