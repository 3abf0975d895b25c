#include <dlock/redis/detail/auto_extend.hpp>

#include <dlock/error.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <vector>

namespace dlock::redis::detail {

// Shared by the extender, its loop coroutine and its validity timer, so a
// run can finish after the extender (and the lock) are gone.
struct auto_extender::state {
  state(asio::any_io_executor ex, lock_loss* l) : loss(l), sleep(ex), deadline(ex) {}

  lock_loss* loss;  // null once the extender is destroyed
  asio::steady_timer sleep;     // until the next extension
  asio::steady_timer deadline;  // the end of validity: loss if reached
  auto_extend_settings settings;
  steady_clock::time_point acquired;
  steady_clock::time_point valid_until;
  step_function step;
  std::vector<asio::any_completion_handler<void(error_code)>> stop_waiters;
  std::uint64_t extensions = 0;
  bool stopping = false;
  bool loop_running = false;

  void fire(error_code why) {
    if (stopping) return;
    stopping = true;  // nothing more to extend: the hold is gone
    sleep.cancel();
    deadline.cancel();
    if (loss) loss->fire(why);
  }
  void arm_deadline(std::shared_ptr<state> self) {
    deadline.expires_at(valid_until);
    deadline.async_wait([self](error_code ec) {
      if (ec || self->stopping) return;
      if (steady_clock::now() >= self->valid_until) self->fire(dlock::error::lost);
    });
  }
  void finish_loop() {
    loop_running = false;
    auto waiters = std::move(stop_waiters);
    stop_waiters.clear();
    for (auto& h : waiters) asio::post(sleep.get_executor(), asio::append(std::move(h), error_code()));
  }
};

namespace {

constexpr auto tuple_token = asio::as_tuple(asio::deferred);

asio::awaitable<void> extend_loop(std::shared_ptr<auto_extender::state> s) {
  auto interval = std::chrono::duration_cast<steady_clock::duration>(s->settings.ttl * s->settings.fraction);
  auto last = s->acquired;
  while (!s->stopping) {
    auto next = last + interval;
    if (s->settings.max_hold.count() > 0 && next > s->acquired + s->settings.max_hold)
      break;  // the cap: let it expire; the deadline tells the holder
    s->sleep.expires_at(next);
    co_await s->sleep.async_wait(tuple_token);
    if (s->stopping) break;
    auto sent = steady_clock::now();
    auto step = s->step;  // a copy: the loop owns what it runs
    auto extending = step();
    extend_outcome outcome = co_await std::move(extending);
    if (s->stopping) break;
    if (outcome.ec) {
      s->fire(outcome.ec);
      break;
    }
    ++s->extensions;
    s->valid_until = outcome.valid_until;
    s->arm_deadline(s);
    last = sent;
  }
  s->finish_loop();
}

}  // namespace

auto_extender::auto_extender(asio::any_io_executor executor, lock_loss& loss)
    : executor_(std::move(executor)), loss_(loss) {}

auto_extender::~auto_extender() {
  if (!state_) return;
  state_->loss = nullptr;
  state_->stopping = true;
  state_->sleep.cancel();
  state_->deadline.cancel();
}

void auto_extender::start(auto_extend_settings settings, steady_clock::time_point acquired,
                          steady_clock::time_point valid_until, step_function step) {
  if (state_) {  // a previous run: detach it (it was stopped)
    state_->loss = nullptr;
    state_->stopping = true;
  }
  state_ = std::make_shared<state>(executor_, &loss_);
  state_->settings = settings;
  state_->acquired = acquired;
  state_->valid_until = valid_until;
  state_->step = std::move(step);
  state_->loop_running = true;
  state_->arm_deadline(state_);
  asio::co_spawn(executor_, extend_loop(state_), asio::detached);
}

void auto_extender::start_stop(asio::any_completion_handler<void(error_code)> handler) {
  if (!state_ || !state_->loop_running) {
    if (state_) state_->stopping = true, state_->deadline.cancel();
    asio::post(executor_, asio::append(std::move(handler), error_code()));
    return;
  }
  state_->stopping = true;
  state_->sleep.cancel();
  state_->deadline.cancel();
  state_->stop_waiters.push_back(std::move(handler));
}

bool auto_extender::running() const noexcept { return state_ && state_->loop_running && !state_->stopping; }

steady_clock::time_point auto_extender::valid_until() const noexcept {
  return state_ ? state_->valid_until : steady_clock::time_point{};
}

std::uint64_t auto_extender::extensions() const noexcept { return state_ ? state_->extensions : 0; }

}  // namespace dlock::redis::detail
