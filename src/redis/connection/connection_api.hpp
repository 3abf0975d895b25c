// How dlock's own locks send over their connections: one command, encoded
// once, to every connection of a lock at once (one server's, or a
// Redlock's masters), each with a per-master deadline. It knows nothing of
// locks: what a command means is the lock's (src/redis/locks/).
#pragma once

#include "detail/recycled_block.hpp"
#include "redis/connection/connection_impl.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/container/small_vector.hpp>
#include <boost/intrusive/list.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

namespace dlock::redis::detail {

/// A fan-out's place in its connections' deadline queue. It lives inside the
/// fan-out (`owner`), so watching one allocates nothing; the queue does not
/// own it, and the fan-out leaves it when answered, expired or destroyed.
struct deadline_entry : boost::intrusive::list_base_hook<> {
  clock::time_point due{};
  void* owner = nullptr;
};

/// The per-master deadlines of one lock's fan-outs, I/O-free. They all use
/// the same timeout, so they fall due in the order they were watched, and
/// one timer serves them all, set once per timeout period rather than
/// twice per fan-out (a system call each).
class deadline_queue {
 public:
  explicit deadline_queue(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  deadline_queue(const deadline_queue&) = delete;
  deadline_queue& operator=(const deadline_queue&) = delete;

  void watch(deadline_entry& entry, clock::time_point now) {
    entry.due = now + timeout_;
    entries_.push_back(entry);
  }
  void unwatch(deadline_entry& entry) noexcept {
    if (entry.is_linked()) entries_.erase(entries_.iterator_to(entry));
  }
  /// When the timer is to wake next; none while nothing is watched.
  std::optional<clock::time_point> next_due() const {
    if (entries_.empty()) return std::nullopt;
    return entries_.front().due;
  }
  /// The oldest entry due at `now`, taken out; null when none is. Those due
  /// within a sixteenth of the timeout count as due (a little early, never
  /// late): under a dead master every fan-out runs into its deadline, and
  /// one wake-up per batch is cheaper than one each.
  deadline_entry* take_due(clock::time_point now) {
    if (entries_.empty() || entries_.front().due > now + timeout_ / 16) return nullptr;
    auto& due = entries_.front();
    entries_.pop_front();
    return &due;
  }

 private:
  std::chrono::milliseconds timeout_;
  boost::intrusive::list<deadline_entry> entries_;
};

class deadline_timer;

/// The connections one lock sends to, on the lock's executor.
class connection_set {
 public:
  /// `master_timeout` zero: none (one server, whose connection's command
  /// timeout applies).
  connection_set(asio::any_io_executor executor, std::vector<std::shared_ptr<connection_impl>> masters,
                 std::chrono::milliseconds master_timeout);

  asio::any_io_executor executor;
  // The connections' internals, shared: a connection destroyed first fails
  // the lock's commands with dlock::error::closed.
  std::vector<std::shared_ptr<connection_impl>> masters;
  // Per master: it runs on `executor` too, so its answers run in place.
  boost::container::small_vector<bool, 7> shares_executor;
  /// The deadlines of the fan-outs in flight: a queue and one timer (none
  /// without a per-master timeout). Fan-outs keep it alive while watched.
  std::shared_ptr<deadline_timer> deadlines;
};

/// One command (or script) to some or all of a set's connections, encoded
/// once; answers arrive on the set's executor. At the per-master timeout the
/// masters still pending are abandoned: their handlers run with
/// operation_aborted shortly after, and their replies, if they come, are
/// dropped by the connection. Pending commands keep a fan-out alive, not
/// its deadline (else a fan-out and its lock would keep each other alive if
/// the io_context stopped first).
class fanout : public reply_sink, public std::enable_shared_from_this<fanout> {
 public:
  /// `to` lives as long as the fan-out (it may be a part of its owner).
  explicit fanout(std::shared_ptr<connection_set> to);
  ~fanout() override;
  fanout(const fanout&) = delete;
  fanout& operator=(const fanout&) = delete;

  /// A master's answer, on the set's executor (see reply_sink).
  void on_reply(std::size_t index, error_code ec, const reply& answer) final;
  const asio::any_io_executor& sink_executor() const noexcept final { return to_->executor; }
  /// The per-master timeout passed (called by the deadline timer).
  void expire();

 protected:
  virtual void on_answer(std::size_t index, error_code ec, const reply& answer) = 0;
  virtual void on_deadline() {}
  virtual void on_all_answered() {}

  /// The one command every send() sends: set once, before the first send,
  /// and never changed, as the requests borrow its bytes while they are
  /// owed (this fan-out, their sink, lives that long).
  inline_command& command() noexcept { return command_; }
  void send(std::size_t index);
  void send_to_all();
  void arm_deadline();
  void abandon_pending();
  bool deadline_passed() const noexcept { return deadline_passed_; }

  const std::shared_ptr<connection_set> to_;

 private:
  void track(std::size_t index);
  void send(std::size_t index, const std::shared_ptr<fanout>& self);

  // What every answer reads comes first, the command's room for a long
  // key last (64 clients' fan-outs in flight must share the cache).
  std::size_t pending_ = 0;
  bool deadline_passed_ = false;
  deadline_entry deadline_;
  // The command sent to the master and not yet answered, to abandon it
  // (in_flight takes the handle's padding: 24 bytes a master).
  struct master_state : request_handle {
    bool in_flight = false;
  };
  boost::container::small_vector<master_state, 7> masters_;  // inline for up to 7 masters
  inline_command command_;
};

/// A fan-out, in a recycled block (detail/recycled_block.hpp): the next
/// fan-out is built in the memory the last one just left.
template <class Fanout, class... Args>
std::shared_ptr<Fanout> make_fanout(Args&&... args) {
  // allocate_shared's control block (two counts and a vtable pointer) is beside it.
  static_assert(sizeof(Fanout) + 32 <= dlock::detail::recycled_block_size, "a fan-out fits a recycled block");
  return std::allocate_shared<Fanout>(dlock::detail::recycling_allocator<Fanout>(), std::forward<Args>(args)...);
}

}  // namespace dlock::redis::detail
