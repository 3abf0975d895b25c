#include "acquire_op_base.hpp"

#include <dlock/zk/error.hpp>

#include "zk/recipe/retry.hpp"

#include <boost/asio/error.hpp>

namespace dlock::zk::detail {

using dlock::detail::completion;
using dlock::detail::forwarding;

step_result classify(const error_code& ec) noexcept {
  if (!ec) return step_result::ok;
  if (ec == zk::error::no_node) return step_result::no_node;
  if (ec == zk::error::node_exists) return step_result::node_exists;
  if (is_retryable(ec)) return step_result::connection_loss;
  if (ec == zk::error::session_expired || ec == zk::error::invalid_state || ec == zk::error::session_moved)
    return step_result::session_lost;
  if (ec == dlock::error::closed || ec == zk::error::closing) return step_result::closed;
  if (ec == asio::error::operation_aborted) return step_result::aborted;
  return step_result::failed;
}

std::vector<std::string> path_prefixes(const std::string& path) {
  std::vector<std::string> out;
  for (std::size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1))
    out.push_back(path.substr(0, at));
  out.push_back(path);
  return out;
}

acquire_op_base::acquire_op_base(client& zk, asio::any_io_executor strand,
                                 const dlock::detail::observed_lock& observed,
                                 asio::any_completion_handler<void(error_code)> handler)
    : zk_(zk), strand_(std::move(strand)), observed_(observed), op_(std::move(handler)) {}

void acquire_op_base::hook_cancellation() {
  // Any cancellation type: a cancelled acquire deletes what it made, so nothing
  // observable is left. Posted, so the cancel runs on the strand after begin().
  op_.hook_cancellation(
      strand_,
      [weak = weak_from_this()](asio::cancellation_type) {
        if (auto self = weak.lock()) self->cancel(asio::error::operation_aborted);
      },
      forwarding::post, asio::cancellation_type::all);
}

void acquire_op_base::starting(bool waits) { started_ = observed_.started(waits); }

void acquire_op_base::begin(std::chrono::steady_clock::duration limit) {
  if (limit > std::chrono::steady_clock::duration::zero()) {
    deadline_.emplace(strand_, limit);
    deadline_->async_wait(on_strand([self = shared_from_this()](error_code ec) {
      if (!ec) self->cancel(make_error_code(dlock::error::timed_out));
    }));
  }
  run();
}

void acquire_op_base::refuse(error_code ec) {
  report(ec);
  op_.complete(completion::post, strand_, ec);
}

void acquire_op_base::report(error_code ec) const { observed_.finished(started_, ec, attempts_, reported_token()); }

void acquire_op_base::complete(error_code ec) {
  if (completed()) return;
  report(ec);
  settle(ec);
  if (deadline_) deadline_->cancel();
  op_.complete(completion::dispatch, strand_, ec);
}

void acquire_op_base::ensure_path(const std::string& path) {
  auto prefixes = path_prefixes(path);
  ensures_pending_ = prefixes.size();
  ensure_error_ = {};
  for (auto& prefix : prefixes) {
    zk_.create(std::move(prefix), {}, create_mode::container,
               on_strand([self = shared_from_this()](error_code ec, zk::created) {
                 if (ec && ec != zk::error::node_exists && !self->ensure_error_) self->ensure_error_ = ec;
                 if (--self->ensures_pending_ == 0)
                   self->path_ensured({classify(self->ensure_error_), self->ensure_error_});
               }));
  }
}

void acquire_op_base::wait_for_watch() {
  watch_.wait(on_strand([self = shared_from_this()](error_code ec, watch_event) {
    self->watch_fired({classify(ec), ec});
  }));
}

void acquire_op_base::sleep(std::chrono::milliseconds delay) {
  if (!sleep_) sleep_.emplace(strand_);
  sleep_->expires_after(with_jitter(delay));
  sleep_->async_wait(on_strand([self = shared_from_this()](error_code) { self->slept(); }));
}

void acquire_op_base::interrupt_sleep() {
  if (sleep_) sleep_->cancel();
}

}  // namespace dlock::zk::detail
