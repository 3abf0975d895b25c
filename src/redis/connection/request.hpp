// One command on its way through a connection: its bytes, its deadline, and
// the one place its answer goes (a caller's handler, or a reply_sink inside
// dlock). The multiplexer decides when a request is answered; the glue
// completes it through its completion_target.
#pragma once

#include "detail/op_base.hpp"

#include <dlock/config.hpp>
#include <dlock/redis/error.hpp>
#include <dlock/redis/reply.hpp>
#include <dlock/redis/script.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>

#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::redis::detail {

using clock = std::chrono::steady_clock;
using handler_type = asio::any_completion_handler<void(error_code, reply)>;
using handler_type0 = asio::any_completion_handler<void(error_code)>;

// A consumer of replies inside dlock (Redlock's fan-out, the connection's own
// greeting): completed without a type-erased handler to allocate per command.
class reply_sink {
 public:
  virtual ~reply_sink() = default;
  virtual const asio::any_io_executor& sink_executor() const noexcept = 0;
  virtual void on_reply(std::size_t index, error_code ec, const reply& answer) = 0;
};

// How a completion leaves: `post` wherever the caller may be inside an
// initiating function or walking the queue (refusals, cancellation,
// deadlines, loss); `dispatch` for replies, which runs an in-place target
// directly (so it may issue its next command in the same read).
enum class completion { post, dispatch };

// Where a request's answer goes: a handler (an op_base: complete once, its
// slot hooked and released), or a sink with the index it gets back. Taken
// once by complete().
class completion_target {
 public:
  void set(handler_type handler, bool in_place) {
    op_.reset(std::move(handler));
    in_place_ = in_place;
    handler_set_ = true;
  }
  void set(std::shared_ptr<reply_sink> sink, std::size_t index, bool in_place) {
    sink_ = std::move(sink);
    index_ = static_cast<std::uint32_t>(index);
    in_place_ = in_place;
  }
  // A cancellation of the handler's slot runs `on_cancel` on `executor`, in
  // place when emitted there (a sink abandons through the connection).
  template <class OnCancel>
  void hook_cancellation(const asio::any_io_executor& executor, OnCancel on_cancel) {
    op_.hook_cancellation(executor, std::move(on_cancel), dlock::detail::forwarding::dispatch);
  }
  void complete(completion how, const asio::any_io_executor& fallback, error_code ec, reply&& value);
  void clear() noexcept {
    if (std::exchange(handler_set_, false)) op_.clear();  // a sink's request never touches op_
    sink_.reset();
    in_place_ = false;
  }

 private:
  void complete_sink(completion how, error_code ec, reply&& value);

  // The sink first: dlock's own locks complete through it, most often.
  std::shared_ptr<reply_sink> sink_;
  std::uint32_t index_ = 0;  // a master's index: never near 2^32
  // Run in place when its reply is read, not dispatched: a handler whose
  // executor is the connection's (see dlock::detail::runs_on), or a
  // continuation of dlock's own locks, which completes onward itself.
  bool in_place_ = false;
  bool handler_set_ = false;  // op_ was given a handler (since the last clear)
  dlock::detail::op_base<void(error_code, reply)> op_;
};

struct request {
  // A completion is owed: set with the target, cleared once by settle() when
  // it is decided (answered, refused, abandoned, timed out, lost). A request
  // no longer owed is skipped if unwritten and its reply dropped if written.
  bool owed = false;
  bool use_eval = false;  // sent (or to be sent) as EVAL, the form `wire` then holds
  bool internal = false;  // handshake command, allowed while connecting
  // A block answered with all its replies, as one array (gathered), not
  // only its last: SET then WAIT, where both answers matter.
  bool gather = false;
  // How many replies the command draws: more than one for a MULTI ... EXEC
  // block, which is answered with its last reply (EXEC's) and takes the others.
  std::uint32_t replies = 1;
  std::uint32_t replies_left = 0;  // counted down as they are read
  std::uint32_t generation = 0;  // bumped when reused: a late cancellation of its last use is ignored
  std::uint32_t tail_offset = 0;  // where numkeys starts in the EVALSHA form (a few dozen bytes in)
  // The bytes of a command its sink owns (a Redlock fan-out sends one
  // command to every master): valid while the request is owed, as the sink
  // lives as long as it is owed one, and read only then (staged, resent).
  // Empty: the request's own `wire`.
  std::string_view borrowed;
  // The script the command runs, if any: the request's own share of it, or
  // with borrowed bytes the sink's (read, as the bytes, only while owed).
  const redis::script::data* script = nullptr;
  std::shared_ptr<const redis::script::data> script_share;
  clock::time_point deadline = clock::time_point::max();
  completion_target target;  // a sink's part first, a handler's after it
  // The request's own RESP bytes: its command (the EVALSHA form for a
  // script) unless borrowed; and, once built, a script's EVAL form, which
  // replaces it (one buffer, so a request stays small).
  std::string wire;
  // A gathering block's replies so far: made for it only (a pointer, so
  // that every other request stays as small as it was).
  std::unique_ptr<std::vector<reply>> gathered;

  /// `wire` holds the bytes written (else it is empty).
  bool uses_wire() const noexcept { return borrowed.empty() || use_eval; }

  void answer_to(handler_type handler, bool in_place) {
    target.set(std::move(handler), in_place);
    owed = true;
  }
  void answer_to(std::shared_ptr<reply_sink> sink, std::size_t index, bool in_place) {
    target.set(std::move(sink), index, in_place);
    owed = true;
  }
  void run_script(std::shared_ptr<const redis::script::data> s) noexcept {
    script = s.get();
    script_share = std::move(s);
  }
  // What to write: the EVAL form once built, else the command, borrowed or own.
  std::string_view bytes() const noexcept {
    if (uses_wire()) return wire;
    assert(owed && "borrowed bytes are read only while the sink is owed an answer, which keeps them");
    return borrowed;
  }
  // A gathering block's answer: its replies in order, `last` included.
  reply take_gathered(reply&& last) {
    std::vector<reply> all;
    if (gathered) all = std::exchange(*gathered, {});
    all.push_back(std::move(last));
    return reply::make_array(std::move(all));
  }
  // True the first time only: the caller then completes it.
  bool settle() noexcept {
    bool was = owed;
    owed = false;
    return was;
  }
};
using request_ptr = std::shared_ptr<request>;

// A request as it was when sent: it may since have completed and been reused.
struct request_handle {
  std::weak_ptr<detail::request> sent;
  std::uint32_t generation = 0;
};

// The pipelining queue: requests wait, are staged into one write, then are
// answered strictly in order. I/O-free; the connection drives it.
/// `Ptr` is a pointer-like handle to a request; `skip(p)` says a waiting
/// request was abandoned before being written (it is dropped, never sent).
template <class Ptr>
class request_queue {
 public:
  void push(Ptr p) { waiting_.push_back(std::move(p)); }
  /// Puts an answered request back at the head of the waiting ones, to be
  /// sent again before them. Keeps the order only while nothing is in
  /// flight (nothing was written after it): the caller checks.
  void push_first(Ptr p) { waiting_.push_front(std::move(p)); }
  bool has_waiting() const noexcept { return !waiting_.empty(); }
  bool empty() const noexcept { return waiting_.empty() && in_flight_.empty(); }
  std::size_t in_flight_size() const noexcept { return in_flight_.size(); }
  std::size_t size() const noexcept { return waiting_.size() + in_flight_.size(); }
  /// The oldest request written and not yet answered (abandoned or not), or null.
  const Ptr* oldest_in_flight() const noexcept { return in_flight_.empty() ? nullptr : &in_flight_.front(); }
  /// Moves every waiting request (but the skipped) to the in-flight FIFO,
  /// calling `on_staged(p)` on each, in order. Returns how many were staged.
  template <class Skip, class OnStaged>
  std::size_t stage_each(Skip skip, OnStaged on_staged) {
    std::size_t staged = 0;
    for (auto& p : waiting_) {
      if (skip(p)) continue;
      on_staged(p);
      in_flight_.push_back(std::move(p));
      ++staged;
    }
    waiting_.clear();
    return staged;
  }
  /// The same, appending each to `batch`.
  template <class Skip>
  std::size_t stage(std::vector<Ptr>& batch, Skip skip) {
    return stage_each(skip, [&batch](const Ptr& p) { batch.push_back(p); });
  }

  /// The request the next reply answers, removed; an empty Ptr when nothing
  /// is in flight (a reply nobody asked for: a protocol violation).
  Ptr pop_answered() {
    if (in_flight_.empty()) return Ptr();
    Ptr p = std::move(in_flight_.front());
    in_flight_.pop_front();
    return p;
  }

  /// Removes every request, in-flight first then waiting, calling f on each.
  template <class F>
  void drain(F f) {
    auto in_flight = std::move(in_flight_);
    auto waiting = std::move(waiting_);
    in_flight_.clear();
    waiting_.clear();
    for (auto& p : in_flight) f(p);
    for (auto& p : waiting) f(p);
  }

  /// Visits requests in order (in-flight, then waiting) while f returns true.
  template <class F>
  void visit(F f) {
    for (auto& p : in_flight_)
      if (!f(p)) return;
    for (auto& p : waiting_)
      if (!f(p)) return;
  }
  template <class F>
  void visit(F f) const {
    for (const auto& p : in_flight_)
      if (!f(p)) return;
    for (const auto& p : waiting_)
      if (!f(p)) return;
  }

 private:
  std::deque<Ptr> waiting_;
  std::deque<Ptr> in_flight_;
};

}  // namespace dlock::redis::detail
