#include "session.hpp"

#include <boost/asio/bind_executor.hpp>

namespace dlock::zk {
namespace detail {
namespace {

/// A waiter that leaves the session's list when cancelled.
template <class... Args>
class session_waiter : public pending<Args...> {
 public:
  session_waiter(const session_ptr& s, handler<Args...> h, void (session::*forget)(pending_base*))
      : pending<Args...>(s->strand(), std::move(h)), session_(s), forget_(forget) {}

 protected:
  void on_cancel() override {
    this->abort();
    if (forget_) ((*session_).*forget_)(this);
  }

 private:
  session_ptr session_;
  void (session::*forget_)(pending_base*);
};

}  // namespace

void start_connect(const session_ptr& s, handler<> h) {
  auto op = make_pending<session_waiter<>>(s, std::move(h), &session::forget_connect_waiter);
  run_on_strand(*s, [s, op] { s->connect(op); });
}

void start_close(const session_ptr& s, handler<> h) {
  auto op = make_pending<session_waiter<>>(s, std::move(h), nullptr);
  run_on_strand(*s, [s, op] { s->close(op); });
}

void start_wait_state_change(const session_ptr& s, handler<session_state> h) {
  auto op = make_pending<session_waiter<session_state>>(s, std::move(h), &session::forget_state_waiter);
  run_on_strand(*s, [s, op, seen = s->state_version()] { s->wait_state_change(op, seen); });
}

}  // namespace detail

client::client(asio::any_io_executor executor, options opts)
    : impl_(std::make_shared<detail::session>(std::move(executor), std::move(opts))) {}

client::~client() {
  if (!impl_ || !owner_) return;
  // Nobody waits for this close; its completion runs on the strand and does nothing.
  auto done = asio::bind_executor(impl_->strand(), [](error_code) {});
  detail::start_close(impl_, detail::handler<>(std::move(done)));
}

client detail::borrow_session(const client& owner) { return client(owner.impl_, client::borrowed_t{}); }
bool detail::session_vouched_for(const client& owner) {
  return owner.impl_->vouched_for(std::chrono::steady_clock::now());
}

client::executor_type client::get_executor() const noexcept { return impl_->strand(); }
session_state client::state() const noexcept { return impl_->state(); }
std::int64_t client::session_id() const noexcept { return impl_->session_id(); }
std::string client::session_password() const { return impl_->session_password(); }
std::string client::current_server() const { return impl_->current_server(); }
const options& client::get_options() const noexcept { return impl_->opts(); }
std::chrono::milliseconds client::negotiated_session_timeout() const noexcept {
  return impl_->negotiated_timeout();
}
statistics client::stats() const noexcept { return impl_->stats(); }

}  // namespace dlock::zk
