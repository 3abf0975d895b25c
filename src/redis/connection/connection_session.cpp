// The connection's glue for its session: resolver, connect, TLS, greeting,
// backoff and connect timers, state waiters. What happens next is the
// lifecycle's to decide (lifecycle.hpp): every completion feeds it an
// event and perform() does what it returns.
#include "redis/connection/connection_impl.hpp"

#include "redis/connection/sentinel_watch.hpp"

#include "detail/op_base.hpp"

#include <dlock/error.hpp>
#include <dlock/log.hpp>
#include "redis/locks/token.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>

#include <algorithm>

#include <fcntl.h>

namespace dlock::redis::detail {
namespace {

using dlock::detail::post_completion;
using kind = lifecycle::action::kind;

std::unique_ptr<asio::ssl::context> make_tls_context(const tls_options& o, error_code& ec) {
  auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
  context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_tlsv1 |
                           asio::ssl::context::no_tlsv1_1,
                       ec);
  if (!ec) {
    if (o.ca_file.empty()) context->set_default_verify_paths(ec);
    else context->load_verify_file(o.ca_file, ec);
  }
  if (!ec && !o.cert_file.empty()) context->use_certificate_chain_file(o.cert_file, ec);
  if (!ec && !o.key_file.empty()) context->use_private_key_file(o.key_file, asio::ssl::context::pem, ec);
  if (!ec) context->set_verify_mode(o.verify_peer ? asio::ssl::verify_peer : asio::ssl::verify_none, ec);
  if (ec) return nullptr;
  return context;
}

}  // namespace

connection_impl::~connection_impl() = default;

connection_impl::connection_impl(asio::any_io_executor executor, options opts)
    : executor_(std::move(executor)),
      opts_(std::move(opts)),
      // Clamped only so that the conversion to nanoseconds cannot overflow:
      // connect() refuses a command_timeout beyond max_duration.
      mux_(std::min(opts_.command_timeout, dlock::max_duration)),
      life_(opts_, jitter_seed()),
      resolver_(executor_),
      socket_(executor_),
      deadline_timer_(executor_),
      backoff_timer_(executor_),
      connect_timer_(executor_) {}

void connection_impl::connect(waiter_ptr w) {
  if (w->op.done()) return;  // cancelled on the way
  using dlock::detail::completion;
  if (state_ == connection_state::closed) return w->op.complete(completion::post, executor_, dlock::error::closed);
  if (!options_invalid_reason(opts_).empty())
    return w->op.complete(completion::post, executor_, dlock::error::invalid_argument);
  if (state_ == connection_state::connected) return w->op.complete(completion::post, executor_, error_code());
  waiters_.push_back(std::move(w));
  if (life_.current() != lifecycle::phase::idle) return;  // started: the waiter joins it
  arm_deadline_timer();
  perform(life_.start());
}

// ---- performing the lifecycle's actions ----

void connection_impl::perform(lifecycle::action a) {
  if (a.master_changed) announce_master_change();
  switch (a.what) {
    case kind::none: return;
    case kind::discover:
      begin_attempt();
      if (!sentinel_) sentinel_ = std::make_shared<sentinel_watch>(executor_, opts_, weak_from_this());
      return sentinel_->discover(life_.attempt());
    case kind::resolve:
      if (a.begins_attempt) begin_attempt();
      return resolve();
    case kind::connect: return start_connect();
    case kind::tls_handshake: return start_tls();
    case kind::greet:
      if (a.open_session) open_session();
      return send_greeting(a.index);
    case kind::up:
      if (a.open_session) open_session();
      connect_timer_.cancel();
      ++stats_.connects;
      publish();
      return notify_connect({});
    case kind::attempt_failed:
      connect_timer_.cancel();
      resolver_.cancel();
      tear_down(error::connection_lost);
      notify_connect(a.error);
      return after_failure(a);
    case kind::lost:
      dlock::detail::log(dlock::log_level::warning, "dlock.redis: connection lost, reconnecting");
      tear_down(error::connection_lost);
      return after_failure(a);
    case kind::retry_now:
      backoff_timer_.cancel();
      return perform(life_.on_backoff_done());
  }
}

void connection_impl::after_failure(const lifecycle::action& a) {
  if (!a.retry) return close();
  publish(a.error);  // disconnected
  backoff_timer_.expires_after(a.backoff);
  backoff_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec) self->perform(self->life_.on_backoff_done());
  });
}

void connection_impl::begin_attempt() {
  publish();  // connecting
  arm_connect_timer();
}

void connection_impl::resolve() {
  const auto& target = life_.address();
  // An address needs no lookup. Asio's resolver works on a thread of its
  // own, which a program that names no host should not get: dlock promises
  // no extra threads, and in a process that ever had two, glibc makes every
  // shared_ptr count an atomic (locked) instruction.
  error_code not_an_address;
  auto address = asio::ip::make_address(target.host, not_an_address);
  if (!not_an_address) {
    endpoints_.assign(1, asio::ip::tcp::endpoint(address, target.port));
    asio::post(executor_, [self = shared_from_this(), attempt = life_.attempt()] {
      self->perform(self->life_.on_resolved(attempt, error_code()));
    });
    return;
  }
  resolver_.async_resolve(target.host, std::to_string(target.port),
                          [self = shared_from_this(), attempt = life_.attempt()](
                              error_code ec, asio::ip::tcp::resolver::results_type endpoints) {
                            self->endpoints_.assign(endpoints.begin(), endpoints.end());
                            self->perform(self->life_.on_resolved(attempt, ec));
                          });
}

// Resolve, connect, TLS and the greeting together must finish in time.
void connection_impl::arm_connect_timer() {
  connect_timer_.expires_after(opts_.connect_timeout);
  connect_timer_.async_wait([self = shared_from_this(), attempt = life_.attempt()](error_code ec) {
    if (!ec) self->perform(self->life_.on_connect_timeout(attempt));
  });
}

void connection_impl::start_connect() {
  asio::async_connect(socket_, endpoints_,
                      [self = shared_from_this(), attempt = life_.attempt()](error_code ec, const auto&) {
                        if (!ec) ec = self->prepare_socket();
                        self->perform(self->life_.on_connected(attempt, ec));
                      });
}

error_code connection_impl::prepare_socket() {
  error_code ec;
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  if (!ec) socket_.non_blocking(true, ec);  // for start_write's first try
  // A child the program execs must not inherit the connection (Asio opens
  // sockets without close-on-exec).
  if (!ec) ::fcntl(socket_.native_handle(), F_SETFD, FD_CLOEXEC);
  return ec;
}

void connection_impl::start_tls() {
  error_code ec;
  if (!tls_context_) tls_context_ = make_tls_context(opts_.tls, ec);
  if (ec) return perform(life_.on_tls_handshake(life_.attempt(), ec));
  // Held by the handshake too: a teardown may drop tls_ meanwhile.
  auto stream = std::make_shared<tls_stream>(socket_, *tls_context_);
  tls_ = stream;
  const std::string& name = opts_.tls.server_name.empty() ? life_.address().host : opts_.tls.server_name;
  if (opts_.tls.verify_peer) stream->set_verify_callback(asio::ssl::host_name_verification(name));
  error_code not_an_address;
  asio::ip::make_address(name, not_an_address);
  if (not_an_address) SSL_set_tlsext_host_name(stream->native_handle(), name.c_str());  // SNI takes names only
  stream->async_handshake(asio::ssl::stream_base::client,
                          [self = shared_from_this(), stream, attempt = life_.attempt()](error_code shaken) {
                            self->perform(self->life_.on_tls_handshake(attempt, shaken));
                          });
}

void connection_impl::open_session() {
  ++session_;
  parser_.reset();
  start_read();
}

// Through the multiplexer like any command; the answer comes back to
// on_reply below, in place, tagged with the attempt.
void connection_impl::send_greeting(std::size_t index) {
  auto r = mux_.make_request();
  r->wire = life_.greeting_command(index);
  r->internal = true;
  r->answer_to(std::shared_ptr<reply_sink>(shared_from_this()), life_.attempt(), true);
  enqueue(std::move(r));
}

void connection_impl::on_reply(std::size_t attempt, error_code ec, const reply& answer) {
  if (ec && answer.is_error())
    dlock::detail::log(dlock::log_level::error, "dlock.redis: handshake refused: " + std::string(answer.string()));
  perform(life_.on_greeting_reply(attempt, ec, answer));
}

// ---- the master, and failovers ----

void connection_impl::sentinel_discovered(std::uint64_t attempt, error_code ec, const server_address& master) {
  if (ec) dlock::detail::log(dlock::log_level::error, "dlock.redis: sentinel discovery failed: " + ec.message());
  perform(life_.on_discovered(attempt, ec, master));
}

void connection_impl::sentinel_switched(const server_address& master) {
  dlock::detail::log(dlock::log_level::warning,
                     "dlock.redis: failover: the master is now " + master.host + ':' + std::to_string(master.port));
  perform(life_.on_switch_master(master));
}

// Watchers that are gone are pruned whenever the list doubled: a lock made
// costs no walk over every other lock's entry.
void connection_impl::watch_master(std::weak_ptr<master_watcher> w) {
  std::lock_guard guard(master_watchers_mutex_);
  if (master_watchers_.size() >= 2 * pruned_size_) {
    std::erase_if(master_watchers_, [](const auto& known) { return known.expired(); });
    pruned_size_ = std::max<std::size_t>(master_watchers_.size(), 8);
  }
  master_watchers_.push_back(std::move(w));
}

// Before the session ends (or, at a reconnect, before it is up): the locks
// learn of it before any command of theirs can reach the new master.
void connection_impl::announce_master_change() {
  auto epoch = life_.master_epoch();
  master_epoch_.store(epoch, std::memory_order_release);
  std::vector<std::weak_ptr<master_watcher>> watchers;
  {
    std::lock_guard guard(master_watchers_mutex_);
    watchers = master_watchers_;  // a watcher may add or leave meanwhile
  }
  for (auto& weak : watchers)
    if (auto watcher = weak.lock()) watcher->on_master_changed(epoch);
}

void connection_impl::close() {
  if (!life_.close()) return;
  if (sentinel_) sentinel_->close();
  tear_down(dlock::error::closed);
  resolver_.cancel();
  deadline_timer_.cancel();
  backoff_timer_.cancel();
  connect_timer_.cancel();
  publish();  // closed
}

// ---- state waiters ----

connection_impl::waiter_ptr connection_impl::new_waiter(connection_state target, bool connect,
                                                        handler_type0 handler) {
  auto w = std::make_shared<waiter>(waiter{dlock::detail::op_base<void(error_code)>(std::move(handler)), target, connect});
  // Terminal and partial cancellation end a wait (op_base's default).
  w->op.hook_cancellation(
      executor_,
      [self = std::weak_ptr<connection_impl>(shared_from_this()), weak = std::weak_ptr<waiter>(w)](
          asio::cancellation_type) {
        auto impl = self.lock();
        auto cancelled = weak.lock();
        if (!impl || !cancelled || cancelled->op.done()) return;
        std::erase(impl->waiters_, cancelled);
        cancelled->op.complete(dlock::detail::completion::post, impl->executor_, asio::error::operation_aborted);
      },
      dlock::detail::forwarding::dispatch);
  return w;
}

void connection_impl::wait_for(waiter_ptr w) {
  if (w->op.done()) return;  // cancelled on the way
  using dlock::detail::completion;
  if (state_ == w->target) return w->op.complete(completion::post, executor_, error_code());
  if (state_ == connection_state::closed) return w->op.complete(completion::post, executor_, dlock::error::closed);
  waiters_.push_back(std::move(w));
}

void connection_impl::complete_waiter(std::list<waiter_ptr>::iterator it, error_code ec) {
  auto w = std::move(*it);
  waiters_.erase(it);
  w->op.complete(dlock::detail::completion::post, executor_, ec);
}

// Makes the lifecycle's state the one users see; waiters for it complete.
void connection_impl::publish(error_code why) {
  auto previous = std::exchange(state_, life_.state());
  if (opts_.observer && state_ != previous) {
    auto server = life_.address().host + ':' + std::to_string(life_.address().port);
    auto reconnects = stats_.connects > 0 ? stats_.connects - 1 : 0;
    opts_.observer->on_redis_connection({server, state_, why, reconnects});
  }
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    auto next = std::next(it);
    if (state_ == connection_state::closed)
      complete_waiter(it, (*it)->target == state_ ? error_code() : dlock::error::closed);
    else if (!(*it)->connect && (*it)->target == state_) complete_waiter(it, {});
    it = next;
  }
}

void connection_impl::notify_connect(error_code ec) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    auto next = std::next(it);
    if ((*it)->connect) complete_waiter(it, ec);
    it = next;
  }
}

}  // namespace dlock::redis::detail
