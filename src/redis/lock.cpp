#include <dlock/redis/lock.hpp>

#include "connection_impl.hpp"
#include "detail/completion.hpp"
#include "lock_scripts.hpp"

#include <dlock/redis/detail/auto_extend.hpp>
#include <dlock/redis/detail/lock_logic.hpp>
#include <dlock/redis/detail/token.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <optional>
#include <random>

namespace dlock::redis {
namespace detail {
namespace {

constexpr auto tuple_token = asio::as_tuple(asio::deferred);

// A command to the connection's internals, which the lock shares: a
// connection destroyed first fails it with dlock::error::closed. Called on
// the connection's executor.
template <class Token>
auto async_submit(const std::shared_ptr<connection_impl>& conn, encoded_command cmd, Token&& token) {
  return asio::async_initiate<Token, void(error_code, reply)>(
      [](auto handler, std::shared_ptr<connection_impl> c, encoded_command e) {
        connection_access::submit(*c, std::move(e), handler_type(std::move(handler)));
      },
      token, conn, std::move(cmd));
}

encoded_command release_command(const std::string& key, const std::string& token) {
  return encode_eval(release_script(), connection::eval_tail({std::string_view(key)}, {std::string_view(token)}));
}

// A cleanup the server did not run (the script was not in its cache and the
// connection could not fall back to EVAL without reordering): send it again.
bool not_run(error_code ec) { return ec == redis::error::script_not_run || ec == redis::error::no_script; }
// The connection was down: the cleanup never reached the server, or its reply
// was lost. Sent again once the connection is back.
bool connection_was_down(error_code ec) {
  return ec == redis::error::not_connected || ec == redis::error::connection_lost;
}
constexpr int max_cleanup_sends = 10;

}  // namespace

// An acquire that waits for cleanups in flight before sending its SET.
struct waiting_acquire {
  bool retry;
  std::chrono::milliseconds wait;
  asio::any_completion_handler<void(error_code)> handler;
  bool in_place;
};

struct lock_state : std::enable_shared_from_this<lock_state> {
  lock_state(std::shared_ptr<connection_impl> c, std::string k, lock_options o)
      : conn(std::move(c)),
        executor(conn->executor()),
        key(std::move(k)),
        opts(o),
        loss(executor),
        extender(executor, loss),
        validity_timer(executor),
        retry_pause(executor),
        random(jitter_seed()) {}

  std::chrono::microseconds drift_for(std::chrono::milliseconds ttl) const {
    return detail::drift(ttl, opts.drift_factor, opts.drift_extra);
  }

  // The connection's internals, shared (see async_submit).
  std::shared_ptr<connection_impl> conn;
  asio::any_io_executor executor;
  std::string key;
  lock_options opts;
  std::string token;
  steady_time acquired{};
  steady_time valid_until{};
  // One operation at a time: at most one of these is true.
  bool held = false;
  bool acquiring = false;
  bool releasing = false;
  // The last hold was released (or given up by ~lock): a second release is a
  // no-op that succeeds, as on every dlock lock. Cleared when an acquire starts.
  bool released = false;
  bool destroyed = false;  // ~lock ran: an acquire in progress gives up
  // Compare-and-deletes sent and not answered yet. No SET NX is sent while
  // one is: its reply (or timeout) comes first, whatever the connection does
  // with it meanwhile (a NOSCRIPT fallback may re-send it later).
  int cleanups_in_flight = 0;
  std::optional<waiting_acquire> waiting;
  lock_loss loss;
  auto_extender extender;  // after `loss`, which it refers to
  // Without auto-extension: wakes when validity ends (see watch_validity).
  asio::steady_timer validity_timer;
  steady_time validity_timer_at{};  // its pending expiry; zero when idle
  asio::steady_timer retry_pause;   // between attempts; cancelled by ~lock
  std::minstd_rand random;
};

namespace {

void send_first_set(std::shared_ptr<lock_state> s, bool retry, std::chrono::milliseconds wait,
                    asio::any_completion_handler<void(error_code)> h, bool in_place);

// ---- cleanups: the compare-and-delete of an attempt's token ----

// Sent again when the server did not run it, and after a reconnection when
// the connection was down, until the key has surely expired (`give_up`).
struct cleanup_reply {
  std::shared_ptr<lock_state> s;
  std::string token;
  steady_time give_up;
  int sends = 1;
  void operator()(error_code ec, reply);
};

void send_cleanup(cleanup_reply c) {
  ++c.s->cleanups_in_flight;
  auto& conn = *c.s->conn;
  auto command = release_command(c.s->key, c.token);  // before `c` is moved
  connection_access::submit(conn, std::move(command), std::move(c));
}

// Best effort, in the background: leave no key of ours behind.
void start_cleanup(const std::shared_ptr<lock_state>& s, std::string token) {
  send_cleanup(cleanup_reply{s, std::move(token), steady_clock::now() + s->opts.ttl});
}

// Waits on the connection (which completes the wait when it is back, or
// closed) rather than polling it.
void resend_when_connected(cleanup_reply c) {
  auto conn = c.s->conn;
  auto executor = c.s->executor;
  auto resend = [c = std::move(c)](error_code ec) mutable {
    if (ec || steady_clock::now() >= c.give_up) return;
    ++c.sends;
    send_cleanup(std::move(c));
  };
  conn->wait_for(connection_state::connected, asio::bind_executor(executor, std::move(resend)));
}

// A cleanup was answered: an acquire waiting for the last one goes on.
void cleanup_answered(const std::shared_ptr<lock_state>& s) {
  if (--s->cleanups_in_flight > 0 || !s->waiting) return;
  auto w = std::move(*s->waiting);
  s->waiting.reset();
  send_first_set(s, w.retry, w.wait, std::move(w.handler), w.in_place);
}

void cleanup_reply::operator()(error_code ec, reply) {
  auto state = s;  // *this may be moved on
  bool again = sends < max_cleanup_sends && steady_clock::now() < give_up;
  if (again && not_run(ec)) {
    ++sends;
    send_cleanup(std::move(*this));  // still in flight: a waiting acquire keeps waiting
  } else if (again && connection_was_down(ec)) {
    resend_when_connected(std::move(*this));
  }
  cleanup_answered(state);
}

// ---- holding ----

asio::awaitable<extend_outcome> extend_step(std::weak_ptr<lock_state> weak) {
  auto s = weak.lock();
  if (!s) co_return extend_outcome{dlock::error::closed, {}};
  auto ttl = s->opts.ttl;
  auto sent = steady_clock::now();
  auto ttl_text = std::to_string(ttl.count());
  auto tail = connection::eval_tail({std::string_view(s->key)}, {std::string_view(s->token), std::string_view(ttl_text)});
  auto op = async_submit(s->conn, encode_eval(extend_script(), tail), tuple_token);
  auto [ec, r] = co_await std::move(op);
  if (!ec) ec = interpret_compare_script(r);
  if (ec) co_return extend_outcome{ec, {}};
  s->valid_until = detail::valid_until(sent, ttl, s->drift_for(ttl));
  co_return extend_outcome{{}, s->valid_until};
}

// Without auto-extension nothing renews a hold, so its loss is signalled
// when validity runs out, as Redlock and the ZooKeeper locks do (with_lock
// then cancels the body). One timer, re-armed lazily: it wakes at the earliest
// validity end it was set for and checks the hold it finds then, so
// back-to-back holds cost no timer update each.
void watch_validity(const std::shared_ptr<lock_state>& s) {
  if (s->validity_timer_at != steady_time{} && s->validity_timer_at <= s->valid_until) return;
  s->validity_timer_at = s->valid_until;
  s->validity_timer.expires_at(s->valid_until);
  s->validity_timer.async_wait([weak = std::weak_ptr<lock_state>(s)](error_code ec) {
    auto state = weak.lock();
    if (!state || ec) return;  // gone, or re-armed for an earlier end
    state->validity_timer_at = steady_time{};
    if (!state->held || state->loss.lost()) return;
    if (steady_clock::now() < state->valid_until) return watch_validity(state);  // a later hold, or extended
    state->loss.fire(dlock::error::lost);
  });
}

void on_acquired(const std::shared_ptr<lock_state>& s, std::string token, steady_time sent) {
  s->token = std::move(token);
  s->held = true;
  s->acquired = sent;
  s->valid_until = valid_until(sent, s->opts.ttl, s->drift_for(s->opts.ttl));
  s->loss.arm();
  if (!s->opts.auto_extend) return watch_validity(s);
  auto_extend_settings settings{s->opts.ttl, s->opts.extend_fraction, s->opts.max_hold};
  std::weak_ptr<lock_state> weak = s;
  s->extender.start(settings, sent, s->valid_until, [weak] { return extend_step(weak); });
}

// What one SET NX PX attempt's answer means for the acquire.
enum class attempt_result { acquired, taken, failed };
attempt_result settle_attempt(const std::shared_ptr<lock_state>& s, std::string& token, steady_time sent,
                              error_code& ec, const reply& r) {
  if (ec) {
    if (set_outcome_unknown(ec)) start_cleanup(s, std::move(token));  // leave no stray key
    return attempt_result::failed;
  }
  switch (interpret_set(r)) {
    case set_outcome::acquired:
      if (s->destroyed) {  // the lock is gone: nobody would release it
        start_cleanup(s, std::move(token));
        ec = asio::error::operation_aborted;
        return attempt_result::failed;
      }
      on_acquired(s, std::move(token), sent);
      return attempt_result::acquired;
    case set_outcome::unexpected:
      ec = redis::error::protocol_error;
      return attempt_result::failed;
    case set_outcome::taken: break;
  }
  return attempt_result::taken;
}

// The retrying path, after a first attempt found the key taken.
asio::awaitable<error_code> attempts(std::shared_ptr<lock_state> s, steady_time give_up) {
  for (;;) {
    auto delay = retry_delay(s->opts.retry_delay, s->opts.retry_jitter, s->random);
    // An attempt that would start after the wait ends could not finish in it.
    if (steady_clock::now() + delay >= give_up) co_return dlock::error::timed_out;
    s->retry_pause.expires_after(delay);
    auto [wait_ec] = co_await s->retry_pause.async_wait(tuple_token);
    if (s->destroyed) co_return asio::error::operation_aborted;
    if (wait_ec) co_return wait_ec;
    std::string token = make_token();  // fresh for every attempt
    command set{"SET", s->key, token, "NX", "PX"};
    set.arg(s->opts.ttl.count());
    auto sent = steady_clock::now();
    auto op = async_submit(s->conn, encode(std::move(set)), tuple_token);
    auto [ec, r] = co_await std::move(op);
    switch (settle_attempt(s, token, sent, ec, r)) {
      case attempt_result::acquired: co_return error_code();
      case attempt_result::failed: co_return ec;
      case attempt_result::taken: break;
    }
  }
}

asio::awaitable<error_code> retry_coro(std::shared_ptr<lock_state> s, steady_time give_up) {
  error_code result;
  // Partial cancellation too, like every acquire (co_spawn passes only terminal by default).
  co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
  try {
    auto trying = attempts(s, give_up);
    result = co_await std::move(trying);
  } catch (const boost::system::system_error& e) {
    result = e.code();  // cancelled between steps
  }
  s->acquiring = false;
  co_return result;
}

// Compare-and-delete of the hold being released; sent again if the server did not run it.
asio::awaitable<error_code> delete_held(std::shared_ptr<lock_state> s, std::string token) {
  for (int sends = 1;; ++sends) {
    auto op = async_submit(s->conn, release_command(s->key, token), tuple_token);
    auto [ec, r] = co_await std::move(op);
    if (not_run(ec) && sends < max_cleanup_sends) continue;
    if (ec) co_return ec;
    co_return interpret_compare_script(r);
  }
}

// The release path when auto-extension may have an extension in flight.
asio::awaitable<error_code> release_coro(std::shared_ptr<lock_state> s, std::string token, error_code loss_reason) {
  auto stopping = s->extender.stop(tuple_token);
  co_await std::move(stopping);  // no extension outlives the release
  auto deleting = delete_held(s, std::move(token));
  auto ec = co_await std::move(deleting);
  s->releasing = false;
  co_return loss_reason ? loss_reason : ec;
}

asio::awaitable<error_code> extend_coro(std::shared_ptr<lock_state> s, std::chrono::milliseconds ttl) {
  if (auto ec = validate(s->key, ttl)) co_return ec;
  if (!s->held) co_return dlock::error::not_held;
  if (s->loss.lost()) co_return dlock::error::lost;
  auto sent = steady_clock::now();
  auto ttl_text = std::to_string(ttl.count());
  auto tail = connection::eval_tail({std::string_view(s->key)}, {std::string_view(s->token), std::string_view(ttl_text)});
  auto op = async_submit(s->conn, encode_eval(extend_script(), tail), tuple_token);
  auto [ec, r] = co_await std::move(op);
  if (ec) co_return ec;
  ec = interpret_compare_script(r);
  if (ec == dlock::error::not_owned) s->loss.fire(ec);
  if (!ec) {
    s->valid_until = valid_until(sent, ttl, s->drift_for(ttl));
    if (!s->opts.auto_extend) watch_validity(s);
  }
  co_return ec;
}

// Completes the user's handler on its own executor with the coroutine's result.
struct complete_with {
  asio::any_completion_handler<void(error_code)> handler;
  asio::any_io_executor fallback;
  void operator()(std::exception_ptr e, error_code ec) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const boost::system::system_error& failure) {
        ec = failure.code();
      } catch (...) {
        ec = asio::error::fault;
      }
    }
    asio::post(fallback, asio::append(std::move(handler), ec));
  }
};

void spawn(const std::shared_ptr<lock_state>& s, asio::awaitable<error_code> coro,
           asio::any_completion_handler<void(error_code)> handler, bool cancellable) {
  auto slot = cancellable ? asio::get_associated_cancellation_slot(handler) : asio::cancellation_slot();
  auto ex = s->executor;
  asio::co_spawn(ex, std::move(coro), asio::bind_cancellation_slot(slot, complete_with{std::move(handler), ex}));
}


// ---- the fast paths: one command, a plain completion handler, no coroutine ----

// From an initiating function: never complete in place.
void complete_soon(const std::shared_ptr<lock_state>& s, asio::any_completion_handler<void(error_code)> h,
                   error_code ec) {
  dlock::detail::post_completion(s->executor, std::move(h), ec);
}

// From a reply continuation (the connection never runs those inside an
// initiating function): the caller may resume in place.
void complete_now(const std::shared_ptr<lock_state>& s, asio::any_completion_handler<void(error_code)> h,
                  bool in_place, error_code ec) {
  dlock::detail::complete_from_handler(in_place, s->executor, std::move(h), ec);
}

// Completion of the first SET NX PX (on the connection's executor).
struct set_reply {
  std::shared_ptr<lock_state> s;
  std::string token;
  steady_time sent;
  steady_time give_up;
  bool retry;
  bool in_place;
  asio::cancellation_slot slot;
  asio::any_completion_handler<void(error_code)> handler;

  using cancellation_slot_type = asio::cancellation_slot;
  cancellation_slot_type get_cancellation_slot() const noexcept { return slot; }

  void operator()(error_code ec, reply r) {
    switch (settle_attempt(s, token, sent, ec, r)) {
      case attempt_result::acquired: return finish({});
      case attempt_result::failed: return finish(ec);
      case attempt_result::taken: break;
    }
    if (!retry) return finish(dlock::error::taken);
    if (s->destroyed) return finish(asio::error::operation_aborted);
    spawn(s, retry_coro(s, give_up), std::move(handler), true);
  }
  void finish(error_code ec) {
    s->acquiring = false;
    complete_now(s, std::move(handler), in_place, ec);
  }
};

void send_first_set(std::shared_ptr<lock_state> s, bool retry, std::chrono::milliseconds wait,
                    asio::any_completion_handler<void(error_code)> h, bool in_place) {
  auto sent = steady_clock::now();
  std::string token = make_token();  // fresh for every attempt
  command set{"SET", s->key, token, "NX", "PX"};
  set.arg(s->opts.ttl.count());
  auto slot = asio::get_associated_cancellation_slot(h);
  auto give_up = sent + wait;
  auto& conn = *s->conn;
  connection_access::submit(conn, encode(std::move(set)),
                            set_reply{std::move(s), std::move(token), sent, give_up, retry, in_place, slot, std::move(h)});
}

// An acquire waiting for earlier cleanups gives up (cancelled, or its lock
// destroyed): nothing of it was sent.
void stop_waiting(const std::shared_ptr<lock_state>& s, bool from_slot) {
  if (!s->waiting) return;
  auto w = std::move(*s->waiting);
  s->waiting.reset();
  s->acquiring = false;
  if (!from_slot) asio::get_associated_cancellation_slot(w.handler).clear();  // not from inside its handler
  complete_soon(s, std::move(w.handler), asio::error::operation_aborted);
}

// Options the lock cannot work with (UB, a tight loop, no validity).
error_code validate_options(std::string_view key, const lock_options& o) {
  if (auto ec = validate(key, o.ttl)) return ec;
  using std::chrono::milliseconds;
  bool bad = o.wait < milliseconds::zero() || o.retry_delay < milliseconds::zero() ||
             o.retry_jitter < milliseconds::zero() || o.drift_extra < milliseconds::zero() ||
             o.max_hold < milliseconds::zero() || !(o.drift_factor >= 0 && o.drift_factor < 1) ||
             !(o.extend_fraction > 0 && o.extend_fraction < 1);
  return bad ? make_error_code(dlock::error::invalid_argument) : error_code();
}

void begin_acquire(std::shared_ptr<lock_state> s, bool retry, std::optional<std::chrono::milliseconds> limit,
                   asio::any_completion_handler<void(error_code)> h, bool in_place) {
  error_code refuse = validate_options(s->key, s->opts);
  if (!refuse && limit && *limit <= std::chrono::milliseconds::zero()) refuse = dlock::error::invalid_argument;
  if (!refuse && s->held) refuse = dlock::error::already_held;
  if (!refuse && (s->acquiring || s->releasing)) refuse = dlock::error::in_progress;
  if (refuse) return complete_soon(s, std::move(h), refuse);
  s->acquiring = true;
  s->released = false;
  auto wait = limit.value_or(s->opts.wait);
  if (s->cleanups_in_flight > 0) {  // an earlier attempt's cleanup goes first (see cleanup_answered)
    auto slot = asio::get_associated_cancellation_slot(h);
    s->waiting.emplace(waiting_acquire{retry, wait, std::move(h), in_place});
    // Nothing is sent yet: any cancellation ends the wait at once. Once the
    // SET goes out the connection takes the slot over (the same handler).
    if (slot.is_connected())
      slot.assign([weak = std::weak_ptr<lock_state>(s)](asio::cancellation_type type) {
        auto state = weak.lock();
        if (state && type != asio::cancellation_type::none) stop_waiting(state, true);
      });
    return;
  }
  send_first_set(std::move(s), retry, wait, std::move(h), in_place);
}

// Completion of the compare-and-delete (on the connection's executor).
struct release_reply {
  std::shared_ptr<lock_state> s;
  std::string token;
  asio::any_completion_handler<void(error_code)> handler;
  bool in_place;
  error_code loss_reason;  // released after a loss: what the caller is told
  int sends = 1;
  void operator()(error_code ec, reply r) {
    if (not_run(ec) && sends < max_cleanup_sends) {
      ++sends;
      auto& conn = *s->conn;
      auto command = release_command(s->key, token);
      return connection_access::submit(conn, std::move(command), std::move(*this));
    }
    if (!ec) ec = interpret_compare_script(r);
    if (loss_reason) ec = loss_reason;
    s->releasing = false;
    complete_now(s, std::move(handler), in_place, ec);
  }
};

void begin_release(std::shared_ptr<lock_state> s, asio::any_completion_handler<void(error_code)> h, bool in_place) {
  if (!s->held) return complete_soon(s, std::move(h), s->released ? error_code() : dlock::error::not_held);
  // After a loss the key may still be ours (validity is a lower bound):
  // delete it all the same, and tell the caller the loss reason.
  error_code loss_reason = s->loss.reason();  // empty unless lost
  s->held = false;
  s->released = true;
  s->releasing = true;  // no new hold starts before the delete is answered
  s->loss.disarm();     // this hold's signal: nothing else is armed until then
  std::string token = s->token;
  if (s->opts.auto_extend) return spawn(s, release_coro(s, std::move(token), loss_reason), std::move(h), false);
  auto& conn = *s->conn;
  auto command = release_command(s->key, token);
  connection_access::submit(conn, std::move(command),
                            release_reply{s, std::move(token), std::move(h), in_place, loss_reason});
}

// ~lock: an acquire in progress gives up (completing with
// operation_aborted), a held key is deleted in the background.
void abandon(const std::shared_ptr<lock_state>& s) {
  s->destroyed = true;
  s->retry_pause.cancel();
  stop_waiting(s, false);
  if (!s->held) return;
  s->held = false;
  s->released = true;
  s->loss.disarm();
  s->extender.stop([](error_code) {});
  start_cleanup(s, s->token);
}

}  // namespace
}  // namespace detail

lock::lock(connection& conn, std::string key, lock_options opts)
    : state_(std::make_shared<detail::lock_state>(detail::connection_access::impl(conn), std::move(key), opts)) {}

lock::~lock() {
  if (state_) detail::abandon(state_);  // not when moved from
}

// The lock's state lives on the connection's executor: get there first.
void lock::start_acquire(bool retry, std::optional<std::chrono::milliseconds> wait, handler_type handler,
                         bool in_place) {
  asio::dispatch(state_->executor, [s = state_, retry, wait, h = std::move(handler), in_place]() mutable {
    detail::begin_acquire(std::move(s), retry, wait, std::move(h), in_place);
  });
}
void lock::start_release(handler_type handler, bool in_place) {
  asio::dispatch(state_->executor, [s = state_, h = std::move(handler), in_place]() mutable {
    detail::begin_release(std::move(s), std::move(h), in_place);
  });
}
void lock::start_extend(std::chrono::milliseconds ttl, handler_type handler) {
  detail::spawn(state_, detail::extend_coro(state_, ttl), std::move(handler), true);
}

asio::any_io_executor lock::get_executor() const noexcept { return state_->executor; }
// A lost hold is not held, although release() is still to be called (it
// deletes the key if it is still ours and reports the loss).
bool lock::held() const noexcept { return state_->held && !state_->loss.lost(); }
std::chrono::milliseconds lock::validity() const noexcept {
  if (!state_->held || state_->loss.lost()) return std::chrono::milliseconds(0);
  return detail::remaining(state_->valid_until, std::chrono::steady_clock::now());
}
const std::string& lock::token() const noexcept { return state_->token; }
const std::string& lock::key() const noexcept { return state_->key; }
const lock_options& lock::options() const noexcept { return state_->opts; }
lock_loss& lock::loss() noexcept { return state_->loss; }
std::uint64_t lock::extensions() const noexcept { return state_->extender.extensions(); }

}  // namespace dlock::redis
