#include "redis/locks/auto_extend.hpp"

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

// Shared by the extender and its loop coroutine, so a run can finish after
// the extender (and the lock) are gone.
struct auto_extender::state {
  explicit state(asio::any_io_executor ex) : sleep(ex) {}

  asio::steady_timer sleep;  // until the next extension
  auto_extend_settings settings;
  steady_clock::time_point acquired;
  step_function step;
  failure_function failed;  // empty once the extender is destroyed
  std::vector<asio::any_completion_handler<void(error_code)>> stop_waiters;
  std::uint64_t extensions = 0;
  bool stopping = false;
  bool loop_running = false;

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
      break;  // the cap: let it expire; the hold's validity watch tells the holder
    s->sleep.expires_at(next);
    co_await s->sleep.async_wait(tuple_token);
    if (s->stopping) break;
    auto sent = steady_clock::now();
    auto step = s->step;  // a copy: the loop owns what it runs
    auto extending = step();
    error_code ec = co_await std::move(extending);
    if (s->stopping) break;
    if (ec) {
      s->stopping = true;  // nothing more to extend: the hold is gone
      if (auto failed = s->failed) failed(ec);
      break;
    }
    ++s->extensions;
    last = sent;
  }
  s->finish_loop();
}

}  // namespace

auto_extender::auto_extender(asio::any_io_executor executor) : executor_(std::move(executor)) {}

auto_extender::~auto_extender() {
  if (!state_) return;
  state_->failed = nullptr;
  state_->stopping = true;
  state_->sleep.cancel();
}

void auto_extender::start(auto_extend_settings settings, steady_clock::time_point acquired, step_function step,
                          failure_function failed) {
  if (state_) {  // a previous run: detach it (it was stopped)
    state_->failed = nullptr;
    state_->stopping = true;
  }
  state_ = std::make_shared<state>(executor_);
  state_->settings = settings;
  state_->acquired = acquired;
  state_->step = std::move(step);
  state_->failed = std::move(failed);
  state_->loop_running = true;
  asio::co_spawn(executor_, extend_loop(state_), asio::detached);
}

void auto_extender::start_stop(asio::any_completion_handler<void(error_code)> handler) {
  if (!state_ || !state_->loop_running) {
    if (state_) state_->stopping = true;
    asio::post(executor_, asio::append(std::move(handler), error_code()));
    return;
  }
  state_->stopping = true;
  state_->sleep.cancel();
  state_->stop_waiters.push_back(std::move(handler));
}

bool auto_extender::running() const noexcept { return state_ && state_->loop_running && !state_->stopping; }

std::uint64_t auto_extender::extensions() const noexcept { return state_ ? state_->extensions : 0; }

}  // namespace dlock::redis::detail
