#include "watch_state.hpp"

#include <dlock/error.hpp>

#include <boost/asio/bind_executor.hpp>

namespace dlock::zk {
namespace detail {

void watch_state::on_event(zhandle_t*, int type, int state, const char* path, void* context) {
  // Inside a C client call: record and post only.
  auto* self = static_cast<watch_state*>(context);
  if (type == ZOO_SESSION_EVENT) {
    // Every path watcher sees every session event; only expiry ends the watch
    // (the C client keeps it and re-registers it after a reconnection).
    if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE)
      self->finish(make_error_code(error::session_expired), {});
    return;
  }
  if (type == ZOO_NOTWATCHING_EVENT) return;
  self->owner_->notification_received();
  watch_event event;
  if (type == ZOO_CREATED_EVENT) event.type = watch_event_type::created;
  else if (type == ZOO_DELETED_EVENT) event.type = watch_event_type::deleted;
  else if (type == ZOO_CHILD_EVENT) event.type = watch_event_type::children_changed;
  else event.type = watch_event_type::data_changed;
  event.path = path ? path : self->path_;
  auto keep = self->shared_from_this();
  self->in_c_client_ = false;  // one-shot: the C client dropped it
  self->owner_->watch_released(self);
  if (self->cancelled_) return;
  self->owner_->watch_event_delivered();
  self->finish({}, std::move(event));
}

void watch_state::arming_reply(int rc, bool registered) {
  if (!registered) return finish(reply_error(rc), {});
  in_c_client_ = true;
  owner_->watch_registered(shared_from_this());
  // Cancelled while the request was in flight: remove it once out of the C call.
  if (cancelled_) owner_->remove_watch_later(shared_from_this());
}

void watch_state::wait(std::shared_ptr<pending<watch_event>> op) {
  if (op->done()) return;
  if (outcome_) return op->complete(outcome_->first, outcome_->second);
  if (waiter_) waiter_->abort();  // one waiter at a time: the newer wins
  waiter_ = std::move(op);
}

void watch_state::cancel() {
  if (cancelled_) return;
  cancelled_ = true;
  finish(asio::error::operation_aborted, {});
  if (in_c_client_) {
    error_code ec;
    if (auto* zh = owner_->handle_for_request(ec)) remove_from_c_client(zh);
  }
}

void watch_state::remove_from_c_client(zhandle_t* zh) {
  if (!in_c_client_) return;
  int rc;
  {
    c_call_guard guard;
    rc = zoo_aremove_watches(zh, path_.c_str(), static_cast<ZooWatcherType>(c_type_), &watch_state::on_event,
                             this, /*local*/ 1, nullptr, nullptr);
  }
  if (rc != ZOK) return;
  in_c_client_ = false;
  auto keep = shared_from_this();
  owner_->watch_released(this);
}

void watch_state::finish(error_code ec, watch_event event) {
  if (outcome_) return;
  outcome_.emplace(ec, std::move(event));
  if (waiter_) {
    waiter_->complete(outcome_->first, outcome_->second);
    waiter_.reset();
  }
}

void start_watch_wait(const std::shared_ptr<watch_state>& state, watch_handler handler) {
  auto op = make_pending<pending<watch_event>>(state->owner()->strand(), std::move(handler));
  run_on_strand(*state->owner(), [state, op]() mutable { state->wait(std::move(op)); });
}

void cancel_watch(const std::shared_ptr<watch_state>& state) {
  if (!state) return;
  run_on_strand(*state->owner(), [state] { state->cancel(); });
}

}  // namespace detail

watch::~watch() { detail::cancel_watch(state_); }

watch& watch::operator=(watch&& other) noexcept {
  if (this != &other) {
    detail::cancel_watch(state_);
    state_ = std::move(other.state_);
    executor_ = std::move(other.executor_);
  }
  return *this;
}

void watch::cancel() {
  detail::cancel_watch(state_);
  state_.reset();
}

}  // namespace dlock::zk
