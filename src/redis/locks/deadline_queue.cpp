#include "redis/locks/deadline_queue.hpp"

#include "redis/locks/engine.hpp"

namespace dlock::redis::detail {

deadline_queue::deadline_queue(asio::any_io_executor executor, std::chrono::milliseconds timeout)
    : timer_(std::move(executor)), timeout_(timeout) {}

void deadline_queue::watch(deadline_entry& entry) {
  entry.due = std::chrono::steady_clock::now() + timeout_;
  entries_.push_back(entry);
  arm();
}

void deadline_queue::unwatch(deadline_entry& entry) noexcept {
  if (entry.is_linked()) entries_.erase(entries_.iterator_to(entry));
}

// Armed for the oldest watched deadline; if that fan-out finished meanwhile
// the timer wakes a little early and re-arms for the next one.
void deadline_queue::arm() {
  if (armed_ || entries_.empty()) return;
  armed_ = true;
  timer_.expires_at(entries_.front().due);
  timer_.async_wait([this, owner = owner_](error_code) {
    if (auto alive = owner.lock()) on_timer();
  });
}

// Fan-outs due within a sixteenth of the timeout are expired together with
// the first (a little early, never late): under a dead master every fan-out
// runs into its deadline, and one wake-up per batch is cheaper than one each.
void deadline_queue::on_timer() {
  armed_ = false;
  auto now = std::chrono::steady_clock::now() + timeout_ / 16;
  while (!entries_.empty() && entries_.front().due <= now) {
    fanout* expiring = entries_.front().op;
    entries_.pop_front();
    // A fan-out in the queue is alive (~fanout leaves it); locked so that
    // expire() may drop the last command holding it.
    if (auto op = expiring->weak_from_this().lock()) op->expire();  // may watch new fan-outs (a cleanup, a retry)
  }
  arm();
}

}  // namespace dlock::redis::detail
