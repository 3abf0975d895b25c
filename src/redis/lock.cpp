// redis::basic_hold, the shell redis::lock and redis::semaphore share:
// release, extend, destruction and the public handle (the semaphore's own
// part is in semaphore.cpp). The acquire is
// in lock_acquire.cpp, the background undos in lock_cleanup.cpp, the hold
// (validity, loss, auto-extension) in engine/hold.cpp.
#include "lock_state.hpp"

#include "detail/completion.hpp"
#include "detail/spawn_to_handler.hpp"
#include "redis/engine/replies.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

namespace dlock::redis {
namespace detail {

namespace {

constexpr auto tuple_token = asio::as_tuple(asio::deferred);

// A command to the connection's internals, which the lock shares. Called on
// the connection's executor.
template <class Token>
auto async_submit(const std::shared_ptr<connection_impl>& conn, encoded_command cmd, Token&& token) {
  return asio::async_initiate<Token, void(error_code, reply)>(
      [](auto handler, std::shared_ptr<connection_impl> c, encoded_command e) {
        connection_access::submit(*c, std::move(e), handler_type(std::move(handler)));
      },
      token, conn, std::move(cmd));
}

}  // namespace

asio::awaitable<error_code> extend_held(std::shared_ptr<lock_state> s, std::chrono::milliseconds ttl) {
  auto sent = steady_clock::now();
  auto op = async_submit(s->conn, s->commands.extend(s->hold.token(), ttl), tuple_token);
  auto [ec, r] = co_await std::move(op);
  if (!ec) ec = interpret_compare_script(r);
  // Read after the extension's own validity ran out (the client paused): the
  // key may be another client's by now, as for an acquire.
  if (!ec && s->hold.validity_if_begun(sent, ttl, steady_clock::now()) <= std::chrono::milliseconds::zero())
    ec = dlock::error::expired;
  if (!ec) s->hold.renew(sent, ttl);
  else s->hold.extension_failed(ec);
  co_return ec;
}

namespace {

asio::awaitable<std::tuple<error_code>> extend_coro(std::shared_ptr<lock_state> s, std::chrono::milliseconds ttl) {
  if (auto ec = validate(s->commands.key, ttl)) co_return ec;
  if (s->hold.state() == hold::phase::lost) co_return make_error_code(dlock::error::lost);
  if (!s->hold.held()) co_return make_error_code(dlock::error::not_held);
  auto extending = extend_held(s, ttl);
  auto ec = co_await std::move(extending);
  if (ec == dlock::error::not_owned || ec == dlock::error::expired) s->hold.lose(ec);
  co_return ec;
}

// Completion of the compare-and-delete (on the connection's executor); sent
// again if the server did not run it.
struct release_reply {
  std::shared_ptr<lock_state> s;
  std::string token;
  dlock::detail::op_base<void(error_code)> op;  // the caller's handler
  bool in_place;
  error_code loss_reason;  // released after a loss: what the caller is told
  int sends = 1;

  void send() {
    auto& conn = *s->conn;
    auto command = s->commands.release(token);  // before *this is moved
    connection_access::submit(conn, std::move(command), std::move(*this));
  }
  void operator()(error_code ec, reply r) {
    if (not_run(ec) && sends < max_cleanup_sends) {
      ++sends;
      return send();
    }
    if (!ec) ec = interpret_compare_script(r);
    if (loss_reason) ec = loss_reason;
    s->releasing = false;
    using dlock::detail::completion;
    op.complete(in_place ? completion::in_place : completion::dispatch, s->executor, ec);
  }
};

void begin_release(std::shared_ptr<lock_state> s, lock_handler h, bool in_place) {
  if (!s->holding()) {  // from the initiating function: never in place
    error_code ec = s->released ? error_code() : make_error_code(dlock::error::not_held);
    return dlock::detail::post_completion(s->executor, std::move(h), ec);
  }
  // After a loss the key may still be ours (validity is a lower bound):
  // delete it all the same, and tell the caller the loss reason.
  release_reply reply{s, s->hold.token(), dlock::detail::op_base<void(error_code)>(std::move(h)), in_place,
                      s->hold.loss().reason()};
  s->released = true;
  s->releasing = true;  // no new hold starts before the delete is answered
  if (!s->opts.auto_extend) {
    s->hold.end();
    return reply.send();
  }
  // No extension may land after the delete: wait for one in flight.
  s->hold.end(lock_handler([reply = std::move(reply)](error_code) mutable { reply.send(); }));
}

// ~basic_hold: an acquire in progress gives up (completing with
// operation_aborted), a held key or lease is released in the background.
void abandon(const std::shared_ptr<lock_state>& s) {
  s->destroyed = true;
  s->retry_pause.cancel();
  stop_waiting(s);
  if (!s->holding()) return;
  s->released = true;
  s->hold.end();
  start_cleanup(s, s->hold.token());
}

}  // namespace
}  // namespace detail

basic_hold::basic_hold(std::shared_ptr<detail::lock_state> state) : state_(std::move(state)) {
  state_->hold.attach(state_);
}

basic_hold::~basic_hold() {
  if (state_) detail::abandon(state_);  // not when moved from
}

// The state lives on the connection's executor: get there first.
void basic_hold::start_acquire(bool retry, std::optional<std::chrono::milliseconds> wait, handler_type handler,
                               bool in_place) {
  detail::acquire_base op(std::move(handler));
  auto number = detail::hook_acquire(state_, op);
  dlock::detail::dispatch_here(state_->executor, [s = state_, number, retry, wait, op = std::move(op), in_place]() mutable {
    detail::begin_acquire(std::move(s), number, retry, wait, std::move(op), in_place);
  });
}
void basic_hold::start_release(handler_type handler, bool in_place) {
  dlock::detail::dispatch_here(state_->executor, [s = state_, h = std::move(handler), in_place]() mutable {
    detail::begin_release(std::move(s), std::move(h), in_place);
  });
}
void basic_hold::start_extend(std::chrono::milliseconds ttl, handler_type handler) {
  dlock::detail::spawn_to_handler(state_->executor, detail::extend_coro(state_, ttl), std::move(handler));
}

asio::any_io_executor basic_hold::get_executor() const noexcept { return state_->executor; }
// A lost hold is not held, although release() is still to be called (it
// deletes the key if it is still ours and reports the loss).
bool basic_hold::held() const noexcept { return state_->hold.held_and_valid(); }
std::chrono::milliseconds basic_hold::validity() const noexcept { return state_->hold.validity(); }
const std::string& basic_hold::token() const noexcept { return state_->hold.token(); }
const std::string& basic_hold::key() const noexcept { return state_->commands.key; }
lock_loss& basic_hold::loss() noexcept { return state_->hold.loss(); }
std::uint64_t basic_hold::extensions() const noexcept { return state_->hold.extensions(); }

lock::lock(connection& conn, std::string key, lock_options opts)
    : basic_hold(std::make_shared<detail::lock_state>(detail::connection_access::impl(conn),
                                                      detail::hold_commands::lock(std::move(key), opts.fencing), opts)) {}

std::int64_t lock::fencing_token() const noexcept { return state_->hold.fencing_token(); }
const lock_options& lock::options() const noexcept { return state_->opts; }

}  // namespace dlock::redis
