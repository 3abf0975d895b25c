// The pipelining multiplexer of a Redis connection, I/O-free (after
// Boost.Redis's detail::multiplexer): requests wait, leave together in one
// write, and are answered strictly in the order written. It decides, and
// returns what to complete; it never calls a handler nor touches a socket.
// The glue (connection.cpp) performs: it writes unwritten(), feeds replies,
// wakes expire() with its one timer, and completes what comes back.
// Who writes the queued commands, and when, is its write_plan's (below).
#pragma once

#include "redis/connection/request.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::redis::detail {

class multiplexer {
 public:
  /// `command_timeout` zero or negative: commands have no deadline.
  explicit multiplexer(clock::duration command_timeout) : timeout_(command_timeout) {}

  // ---- requests ----
  /// A request from the spares (its buffers reused), or a new one.
  request_ptr make_request();
  /// Takes back an answered request nothing else holds, for make_request.
  void recycle(request_ptr r);
  /// Queues an owed request; its deadline is `now` + the command timeout.
  void add(request_ptr r, clock::time_point now);
  /// The caller gives up on `r` (its use `generation`): true when it was
  /// still owed, and the caller completes it with operation_aborted. If
  /// unwritten it is never sent, else its reply is read and dropped.
  bool abandon(request& r, std::uint32_t generation) noexcept;

  // ---- writing: one write at a time, everything waiting goes in it ----
  /// Requests wait and no write is in progress.
  bool wants_write() const noexcept { return !writing_ && queue_.has_waiting(); }
  /// Stages every waiting owed request, appended to the caller's `out` (a
  /// script as EVAL on its first use on this session, else EVALSHA).
  /// Returns how many (0: nothing to write, or a write is in progress). The
  /// caller writes `out` at once and hands back, with keep_unwritten(), what
  /// the socket did not take: the bytes of most writes then never touch this
  /// connection's own buffer (see connection.cpp).
  std::size_t prepare_write(std::string& out);
  /// What is left of the staged write becomes the write in progress,
  /// unwritten(); true when nothing is (the write ends).
  bool keep_unwritten(std::string_view rest);
  std::string_view unwritten() const noexcept { return std::string_view(out_).substr(written_); }
  /// `n` more bytes of unwritten() went out; true once all did (the write ends).
  bool commit_write(std::size_t n) noexcept;

  // ---- reading ----
  struct answer {
    enum class kind {
      complete,    // complete `request` with `ec` and the reply, then recycle it
      drop,        // the reply of an abandoned request: recycle it
      more,        // one of a MULTI block's first replies: nothing to do yet
      resend,      // NOSCRIPT: re-queued as EVAL, a write is wanted
      unexpected,  // a reply nobody asked for: the stream is out of sync
    } what;
    request_ptr request;
    error_code ec;
  };
  /// Matches a reply to the oldest written request (a request drawing
  /// several replies is answered with the last).
  answer on_reply(const reply& r);
  /// Bytes were read at `now` (the server is not silent).
  void note_read(clock::time_point now) noexcept { last_read_ = now; }
  clock::time_point last_read() const noexcept { return last_read_; }

  // ---- deadlines: one timer for all commands ----
  bool timed() const noexcept { return timeout_.count() > 0; }
  /// When the timer should wake: the oldest owed deadline, or one timeout
  /// from `now` (soon enough to catch any command issued meanwhile).
  clock::time_point next_deadline(clock::time_point now) const;
  /// Appends the owed requests whose deadline passed (to fail with
  /// timed_out). Returns true when the server is silent: the oldest written
  /// request waited a full timeout with nothing read since it was issued.
  bool expire(clock::time_point now, std::vector<request_ptr>& expired);

  // ---- the session ----
  /// The session ended: forgets everything written and waiting, appends the
  /// owed requests (to fail: connection_lost, or closed) and the scripts
  /// known loaded (the next session may reach a restarted server). Returns
  /// whether any request at all was pending (then the socket closes with an
  /// RST, see connection.cpp).
  bool reset(std::vector<request_ptr>& failed);

  std::size_t pending() const noexcept { return queue_.size(); }
  std::uint64_t commands_written() const noexcept { return commands_; }
  std::uint64_t replies_read() const noexcept { return replies_; }

 private:
  std::size_t stage(std::string& out);
  bool script_loaded(const script::data& s) const noexcept;
  void choose_script_form(request& r);
  bool resend_as_eval(request_ptr& r);

  clock::duration timeout_;
  request_queue<request_ptr> queue_;
  std::vector<request_ptr> spare_;  // answered requests, kept for reuse
  // Scripts sent as EVAL on this session, so loaded in the server's cache
  // unless it was flushed since: their next uses go as EVALSHA. Forgotten
  // on a reset and on a NOSCRIPT. A few entries (dlock's locks use two or
  // three scripts), by SHA-1: a request's script need only live while the
  // request is owed (a borrowed one is its sink's, see connection_api.cpp).
  static constexpr std::size_t sha1_digits = 40;
  using sha1_words = std::array<std::uint64_t, sha1_digits / 8>;
  static sha1_words words_of(const std::string& sha1) noexcept;
  std::vector<sha1_words> loaded_scripts_;
  std::string out_;  // the bytes of the write in progress
  std::size_t written_ = 0;
  bool writing_ = false;
  clock::time_point last_read_{};
  std::uint64_t commands_ = 0;
  std::uint64_t replies_ = 0;
};

// Who writes a connection's queued commands, and when. I/O-free: the glue
// (connection.cpp) tells it what happens and performs what it answers.
//
// - Commands queued while nothing else runs leave after the handlers already
//   queued (a post): commands issued together share one write.
// - Commands queued while this connection hands out a read's replies (their
//   continuations run in place) leave when the hand-out ends, together, before
//   the next read is armed.
// - With `leave_with_others` (the speed trick, DLOCK_SPEED_TRICKS), commands
//   queued while *another* connection on the same executor hands out replies
//   are left with that one, which writes them when its hand-out ends: a
//   Redlock reply's continuation writes to every master, and this saves a
//   post and a scheduler pass per master and round (RESULTS.md).
class write_plan {
 public:
  enum class action {
    none,                // a write is already due: nothing to do
    post,                // write from the executor's queue
    leave_with_hand_out  // the connection handing out replies writes it at its end
  };

  explicit write_plan(bool leave_with_others) noexcept : leave_with_others_(leave_with_others) {}

  /// Commands wait to be written. `other_handing_out`: another connection on
  /// this executor hands out replies on this thread now.
  action on_queued(bool other_handing_out) noexcept {
    if (due_) return action::none;
    if (handing_out_) {
      wanted_at_end_ = true;
      return action::none;
    }
    due_ = true;
    return leave_with_others_ && other_handing_out ? action::leave_with_hand_out : action::post;
  }
  /// The posted or left write runs now (or will never: its session ended).
  void on_due_write_runs() noexcept { due_ = false; }

  void on_hand_out_begins() noexcept { handing_out_ = true; }
  void on_hand_out_ends() noexcept { handing_out_ = false; }
  /// True once after a hand-out during which commands were queued: write
  /// them now. (A hand-out cut short by an exception leaves them wanted
  /// until it resumes.)
  bool take_wanted() noexcept { return !handing_out_ && std::exchange(wanted_at_end_, false); }
  bool handing_out() const noexcept { return handing_out_; }

  /// The session ended: its commands are gone, nothing is wanted.
  void on_session_end() noexcept { wanted_at_end_ = false; }

 private:
  bool leave_with_others_;
  bool due_ = false;            // a post or a left write will run
  bool handing_out_ = false;    // this connection hands out replies
  bool wanted_at_end_ = false;  // commands queued during the hand-out
};

}  // namespace dlock::redis::detail
