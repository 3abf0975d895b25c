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
  std::vector<reply> gathered;  // a gathering block's replies so far

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
    gathered.push_back(std::move(last));
    return reply::make_array(std::exchange(gathered, {}));
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

}  // namespace dlock::redis::detail
