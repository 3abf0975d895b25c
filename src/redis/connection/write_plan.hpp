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
#pragma once

#include <utility>

namespace dlock::redis::detail {

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
