// The session behind dlock::zk::client: one zhandle_t driven by the io_context.
//
// Driver (all on the strand): zookeeper_interest gives the socket, the
// interest set and a deadline. Asio waits on a dup() of the socket (ZK keeps
// and closes its own fd; a new socket is detected by st_dev/st_ino, not by
// number). Readiness runs zookeeper_process until ZNOTHING (bounded); the
// deadline runs zookeeper_interest again (it sends pings and detects
// timeouts). Every zoo_a* call is followed by one coalesced re-evaluation.
// C callbacks only record results and post handlers.
//
// One class, three files: session.cpp (the lifecycle: opening the zhandle,
// session events through session_fsm, waiters, watches), session_driver.cpp
// (the poll driver above) and session_close.cpp (the close protocol).
#pragma once

#include "c_client.hpp"
#include "pending.hpp"
#include "session_fsm.hpp"

#include <dlock/zk/client.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <vector>

namespace dlock::zk::detail {

class watch_state;

class session : public std::enable_shared_from_this<session> {
 public:
  session(asio::any_io_executor executor, options opts);
  ~session();

  const strand_type& strand() const noexcept { return strand_; }

  // --- strand only ---
  void connect(pending_ptr<> op);
  void close(pending_ptr<> op);
  /// `seen`: state_version() when the caller initiated; a change since then completes at once.
  void wait_state_change(pending_ptr<session_state> op, std::uint64_t seen);
  void forget_state_waiter(pending_base* op);
  void forget_connect_waiter(pending_base* op);
  /// Null with `ec` set when no request can be sent now.
  zhandle_t* handle_for_request(error_code& ec) const noexcept;
  const ACL_vector* default_acl() const noexcept;
  /// After every zoo_a* call: counts it and re-evaluates interest once per batch.
  void request_sent();
  /// Posts a step (one at a time): the C client's waits are armed again.
  void step_soon();
  /// A completion ran with `rc` for a request sent at `sent_at` (inside a C call).
  void reply_received(int rc, std::chrono::steady_clock::time_point sent_at) noexcept;
  /// A watch notification arrived (inside a C call): it proves nothing about
  /// what the server heard from us.
  void notification_received() noexcept { ++frames_explained_; }
  void watch_registered(std::shared_ptr<watch_state> w);
  void watch_released(watch_state* w);
  void remove_watch_later(std::shared_ptr<watch_state> w);
  /// A cancelled create succeeded anyway: delete its node once out of the C
  /// call. A name of its own (`unique_name`, a sequential node) is deleted
  /// again on the next connection if the connection is lost first; another
  /// name is not, as by then somebody else may have made a node under it.
  void remove_orphan_later(std::string path, bool unique_name) {
    orphans_.push_back({std::move(path), unique_name});
  }
  void watch_event_delivered() noexcept { watch_events_.fetch_add(1, std::memory_order_relaxed); }
  /// The servers cannot have expired the session by `now`: it is before
  /// the earliest expiry the client can bound (session_fsm.hpp).
  bool vouched_for(std::chrono::steady_clock::time_point now) const noexcept {
    return now < expiry_.lost_at(negotiated_timeout());
  }

  // --- any thread ---
  session_state state() const noexcept { return static_cast<session_state>(state_.load()); }
  std::int64_t session_id() const noexcept { return session_id_.load(); }
  std::string session_password() const;
  std::string current_server() const;
  std::chrono::milliseconds negotiated_timeout() const noexcept {
    return std::chrono::milliseconds(negotiated_timeout_ms_.load());
  }
  const options& opts() const noexcept { return options_; }
  statistics stats() const noexcept;
  bool is_closing() const noexcept { return closing_.load(); }
  std::uint64_t state_version() const noexcept { return state_version_.load(); }

 private:
  // ---- lifecycle (session.cpp): the zhandle, session events, waiters, watches
  static void global_watcher(zhandle_t*, int type, int state, const char* path, void* context);
  static void on_orphan_removed(int rc, const void* context);
  bool open_handle(error_code& ec);
  void after_c_calls();
  void on_session_event(int state);
  void on_connected();
  void on_handle_dead();
  void release_handle(error_code watch_error);
  void set_state_changed();
  /// Tells the observer the states recorded since (never inside a C call).
  void report_states();
  void start_lost_timer();
  void complete_connect_waiters(error_code ec);

  // ---- poll driver (session_driver.cpp): the socket copy, readiness, the interest timer
  void step();
  void drain(int events);
  void sync_descriptor(int fd);
  void drop_socket();
  void stop_driver_waits();
  void arm_read();
  void arm_write();
  /// Connected, with bytes to send: sends what the socket takes now. True
  /// when nothing is left to wait for (all sent, or the send failed and a
  /// step is queued).
  bool sent_without_waiting();
  void arm_readiness(asio::posix::descriptor_base::wait_type wait, bool session::*armed, int events);
  void arm_timer(std::chrono::steady_clock::duration delay);
  bool socket_is_current() const;

  // ---- close protocol (session_close.cpp): probe, CLOSE, await the server's end
  static void on_close_probe(int rc, const Stat*, const void* context);
  void send_close_probe();
  void send_close_request();
  void await_server_close();
  void shut_c_socket();
  void finish_close();

  strand_type strand_;
  options options_;
  std::vector<session_state> unreported_states_;  // for the observer, told after the C calls
  zhandle_t* zh_ = nullptr;
  session_fsm fsm_;

  // poll driver
  asio::posix::stream_descriptor socket_;  // a dup() of the C client's socket
  dev_t socket_dev_ = 0;
  ino_t socket_ino_ = 0;
  int socket_fd_number_ = -1;  // the C client's fd the copy was made from
  bool connected_at_last_step_ = false;
  unsigned socket_generation_ = 0;
  bool read_armed_ = false;
  bool write_armed_ = false;
  bool kick_pending_ = false;

  asio::steady_timer timer_;  // zookeeper_interest's deadline
  std::chrono::steady_clock::time_point timer_deadline_{};
  bool timer_armed_ = false;
  unsigned timer_generation_ = 0;

  // lifecycle
  asio::steady_timer connect_timer_;  // options::connect_timeout
  asio::steady_timer lost_timer_;  // suspended past expiry_.lost_at -> lost
  expiry_bound expiry_;             // when the servers may expire the session
  std::uint64_t frames_explained_ = 0;  // completions and notifications seen by drain()
  bool handle_dead_ = false;        // expired or auth failed, seen inside a C call
  bool auth_failed_ = false;

  std::vector<pending_ptr<>> connect_waiters_;
  std::vector<pending_ptr<session_state>> state_waiters_;
  std::map<watch_state*, std::shared_ptr<watch_state>> c_watches_;  // held by the C client
  std::vector<std::shared_ptr<watch_state>> removals_;              // cancelled before registration
  struct orphan {  // a node made by a cancelled create
    std::string path;
    bool unique_name;
  };
  std::vector<orphan> orphans_;
  struct orphan_removal {  // its delete, in flight
    session* owner;
    orphan node;
  };

  // close protocol
  // probing: waiting for a server to answer the probe; closing: CLOSE sent,
  // waiting for the server to end the connection (the C client is not driven).
  enum class close_phase { open, probing, closing, done } close_phase_ = close_phase::open;
  bool reprobe_when_connected_ = false;  // the probe's connection dropped: probe again once reconnected
  asio::steady_timer close_timer_;
  std::vector<pending_ptr<>> close_waiters_;

  // read from any thread
  std::atomic<bool> closing_{false};
  std::atomic<int> state_{static_cast<int>(session_state::connecting)};
  std::atomic<std::uint64_t> state_version_{0};  // counts state changes
  std::atomic<std::int64_t> session_id_{0};
  std::atomic<int> negotiated_timeout_ms_{0};
  mutable std::mutex facts_mutex_;
  std::string password_;
  std::string server_;
  std::atomic<std::uint64_t> requests_sent_{0}, replies_received_{0}, watch_events_{0}, sessions_opened_{0},
      reconnections_{0};
};

/// Runs `f` on the session's strand: at once when already there (no scheduler
/// hop for a recipe calling from its own strand), posted otherwise.
template <class F>
void run_on_strand(const session& s, F&& f) {
  if (s.strand().running_in_this_thread()) f();
  else asio::post(s.strand(), std::forward<F>(f));
}

/// What a C completion callback needs: the pending op back from its context.
template <class P>
std::shared_ptr<P> take_c_hold(const void* context) {
  auto* base = static_cast<pending_base*>(const_cast<void*>(context));
  auto hold = std::move(base->c_hold);
  return std::static_pointer_cast<P>(std::move(hold));
}

/// A request's error from the C client's code. ZCLOSING (the client was
/// closed) reads better as dlock::error::closed; ZRUNTIMEINCONSISTENCY is a
/// connection loss (see lost_with_the_connection).
error_code reply_error(int rc) noexcept;

/// The C client failed the request without an answer: the connection
/// dropped or timed out, or its replies stopped matching its requests
/// (ZRUNTIMEINCONSISTENCY: 3.8.0 drops its socket when a write fails, without
/// failing the requests already written there, and finds out on the next
/// connection). It then closes the connection and fails every pending
/// request the same way; what became of each is unknown.
bool lost_with_the_connection(int rc) noexcept;

}  // namespace dlock::zk::detail
