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
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <random>

namespace dlock::redis {
namespace detail {
namespace {

constexpr auto tuple_token = asio::as_tuple(asio::deferred);

}  // namespace

struct lock_state : std::enable_shared_from_this<lock_state> {
  lock_state(connection& c, std::string k, lock_options o)
      : conn(&c),
        key(std::move(k)),
        opts(o),
        loss(c.get_executor()),
        extender(c.get_executor(), loss),
        validity_timer(c.get_executor()),
        random(jitter_seed()) {}

  std::chrono::microseconds drift_for(std::chrono::milliseconds ttl) const {
    return detail::drift(ttl, opts.drift_factor, opts.drift_extra);
  }
  // Best effort, in the background: the compare-and-delete of `t`.
  void delete_in_background(const std::string& t) {
    conn->eval(release_script(), {key}, {t}, asio::detached);
  }

  connection* conn;
  std::string key;
  lock_options opts;
  std::string token;
  steady_time acquired{};
  steady_time valid_until{};
  bool held = false;
  bool acquiring = false;
  lock_loss loss;
  auto_extender extender;  // after `loss`, which it refers to
  // Without auto-extension: wakes when validity ends (see watch_validity).
  asio::steady_timer validity_timer;
  steady_time validity_timer_at{};  // its pending expiry; zero when idle
  std::minstd_rand random;
};

namespace {

asio::awaitable<extend_outcome> extend_step(std::weak_ptr<lock_state> weak) {
  auto s = weak.lock();
  if (!s) co_return extend_outcome{dlock::error::closed, {}};
  auto ttl = s->opts.ttl;
  auto sent = steady_clock::now();
  auto op = s->conn->eval(extend_script(), {s->key}, {s->token, std::to_string(ttl.count())}, tuple_token);
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

// The retrying path, after a first attempt found the key taken.
asio::awaitable<error_code> attempts(std::shared_ptr<lock_state> s, steady_time give_up) {
  asio::steady_timer pause(s->conn->get_executor());
  for (;;) {
    auto delay = retry_delay(s->opts.retry_delay, s->opts.retry_jitter, s->random);
    if (steady_clock::now() + delay >= give_up) co_return dlock::error::taken;
    pause.expires_after(delay);
    auto [wait_ec] = co_await pause.async_wait(tuple_token);
    if (wait_ec) co_return wait_ec;
    std::string token = make_token();  // fresh for every attempt
    command set{"SET", s->key, token, "NX", "PX"};
    set.arg(s->opts.ttl.count());
    auto sent = steady_clock::now();
    auto op = s->conn->exec(std::move(set), tuple_token);
    auto [ec, r] = co_await std::move(op);
    if (ec) {
      if (set_outcome_unknown(ec)) s->delete_in_background(token);  // leave no stray key
      co_return ec;
    }
    auto outcome = interpret_set(r);
    if (outcome == set_outcome::acquired) {
      on_acquired(s, std::move(token), sent);
      co_return error_code();
    }
    if (outcome == set_outcome::unexpected) co_return redis::error::protocol_error;
  }
}

asio::awaitable<error_code> retry_coro(std::shared_ptr<lock_state> s, steady_time give_up) {
  error_code result;
  try {
    auto trying = attempts(s, give_up);
    result = co_await std::move(trying);
  } catch (const boost::system::system_error& e) {
    result = e.code();  // cancelled between steps
  }
  s->acquiring = false;
  co_return result;
}

// The release path when auto-extension may have an extension in flight.
asio::awaitable<error_code> release_coro(std::shared_ptr<lock_state> s) {
  auto stopping = s->extender.stop(tuple_token);
  co_await std::move(stopping);  // no extension outlives the release
  s->loss.disarm();
  auto op = s->conn->eval(release_script(), {s->key}, {s->token}, tuple_token);
  auto [ec, r] = co_await std::move(op);
  if (ec) co_return ec;
  co_return interpret_compare_script(r);
}

asio::awaitable<error_code> extend_coro(std::shared_ptr<lock_state> s, std::chrono::milliseconds ttl) {
  if (auto ec = validate(s->key, ttl)) co_return ec;
  if (!s->held) co_return dlock::error::not_held;
  if (s->loss.lost()) co_return dlock::error::lost;
  auto sent = steady_clock::now();
  auto op = s->conn->eval(extend_script(), {s->key}, {s->token, std::to_string(ttl.count())}, tuple_token);
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
  auto ex = s->conn->get_executor();
  asio::co_spawn(ex, std::move(coro), asio::bind_cancellation_slot(slot, complete_with{std::move(handler), ex}));
}


// ---- the fast paths: one command, a plain completion handler, no coroutine ----

// From an initiating function: never complete in place.
void complete_soon(const std::shared_ptr<lock_state>& s, asio::any_completion_handler<void(error_code)> h,
                   error_code ec) {
  dlock::detail::post_completion(s->conn->get_executor(), std::move(h), ec);
}

// From a reply continuation (the connection never runs those inside an
// initiating function): the caller may resume in place.
void complete_now(const std::shared_ptr<lock_state>& s, asio::any_completion_handler<void(error_code)> h,
                  bool in_place, error_code ec) {
  dlock::detail::complete_from_handler(in_place, s->conn->get_executor(), std::move(h), ec);
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
    if (ec) {
      if (set_outcome_unknown(ec)) s->delete_in_background(token);  // leave no stray key
      return finish(ec);
    }
    switch (interpret_set(r)) {
      case set_outcome::acquired:
        on_acquired(s, std::move(token), sent);
        return finish({});
      case set_outcome::unexpected: return finish(redis::error::protocol_error);
      case set_outcome::taken: break;
    }
    if (!retry) return finish(dlock::error::taken);
    spawn(s, retry_coro(s, give_up), std::move(handler), true);
  }
  void finish(error_code ec) {
    s->acquiring = false;
    complete_now(s, std::move(handler), in_place, ec);
  }
};

void begin_acquire(std::shared_ptr<lock_state> s, bool retry, asio::any_completion_handler<void(error_code)> h,
                   bool in_place) {
  error_code refuse = validate(s->key, s->opts.ttl);
  if (!refuse && (s->held || s->acquiring)) refuse = dlock::error::already_held;
  if (refuse) return complete_soon(s, std::move(h), refuse);
  s->acquiring = true;
  auto sent = steady_clock::now();
  std::string token = make_token();  // fresh for every attempt
  command set{"SET", s->key, token, "NX", "PX"};
  set.arg(s->opts.ttl.count());
  auto slot = asio::get_associated_cancellation_slot(h);
  auto give_up = sent + s->opts.wait;
  auto& conn = *s->conn;
  connection_access::exec(conn, std::move(set),
                          set_reply{std::move(s), std::move(token), sent, give_up, retry, in_place, slot, std::move(h)});
}

// Completion of the compare-and-delete (on the connection's executor).
struct release_reply {
  std::shared_ptr<lock_state> s;
  asio::any_completion_handler<void(error_code)> handler;
  bool in_place;
  void operator()(error_code ec, reply r) {
    if (!ec) ec = interpret_compare_script(r);
    complete_now(s, std::move(handler), in_place, ec);
  }
};

void begin_release(std::shared_ptr<lock_state> s, asio::any_completion_handler<void(error_code)> h, bool in_place) {
  if (!s->held) return complete_soon(s, std::move(h), dlock::error::not_held);
  s->held = false;
  if (s->opts.auto_extend) return spawn(s, release_coro(s), std::move(h), false);
  s->loss.disarm();
  auto& conn = *s->conn;
  connection_access::eval(conn, release_script(), connection::eval_tail({s->key}, {s->token}),
                          release_reply{s, std::move(h), in_place});
}

}  // namespace
}  // namespace detail

lock::lock(connection& conn, std::string key, lock_options opts)
    : state_(std::make_shared<detail::lock_state>(conn, std::move(key), opts)) {}

lock::~lock() {
  if (state_->held) state_->delete_in_background(state_->token);
}

// The lock's state lives on the connection's executor: get there first.
void lock::start_acquire(bool retry, handler_type handler, bool in_place) {
  asio::dispatch(state_->conn->get_executor(), [s = state_, retry, h = std::move(handler), in_place]() mutable {
    detail::begin_acquire(std::move(s), retry, std::move(h), in_place);
  });
}
void lock::start_release(handler_type handler, bool in_place) {
  asio::dispatch(state_->conn->get_executor(), [s = state_, h = std::move(handler), in_place]() mutable {
    detail::begin_release(std::move(s), std::move(h), in_place);
  });
}
void lock::start_extend(std::chrono::milliseconds ttl, handler_type handler) {
  detail::spawn(state_, detail::extend_coro(state_, ttl), std::move(handler), true);
}

asio::any_io_executor lock::get_executor() const noexcept { return state_->conn->get_executor(); }
bool lock::held() const noexcept { return state_->held; }
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
