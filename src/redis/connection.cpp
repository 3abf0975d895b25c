#include "connection_impl.hpp"

#include "detail/completion.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/detail/command_check.hpp>
#include <dlock/redis/detail/token.hpp>
#include <dlock/log.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>

#include <fcntl.h>

namespace dlock::redis {
namespace detail {
namespace {

using dlock::detail::complete_from_handler;
using dlock::detail::post_completion;

constexpr auto tuple_token = asio::as_tuple(asio::deferred);

bool cancels(asio::cancellation_type t) {
  return (t & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) !=
         asio::cancellation_type::none;
}

// The EVAL form of an EVALSHA request (same array length and tail), in
// r.eval_wire (its buffer reused).
void build_eval_form(request& r) {
  auto header_end = r.wire.find("\r\n") + 2;
  std::string& out = r.eval_wire;
  out.clear();
  out.reserve(r.wire.size() + r.script->source.size() + 16);
  out.append(r.wire, 0, header_end);
  out += "$4\r\nEVAL\r\n$";
  out += std::to_string(r.script->source.size());
  out += "\r\n";
  out += r.script->source;
  out += "\r\n";
  out.append(r.wire, r.tail_offset, std::string::npos);
}

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
      resolver_(executor_),
      socket_(executor_),
      deadline_timer_(executor_),
      session_end_(executor_),
      backoff_timer_(executor_),
      connect_timer_(executor_),
      random_(jitter_seed()) {}

// ---- commands ----

void connection_impl::enqueue(request_ptr r) {
  if (!r->live()) return;  // cancelled before it reached the executor
  error_code refuse;
  if (closed_) refuse = dlock::error::closed;
  else if (!session_open_ || (!r->internal && state_ != connection_state::connected))
    refuse = error::not_connected;  // (the state lags a reset until the run loop sees it)
  if (refuse) return finish(*r, refuse, reply(), completion::post);

  if (opts_.command_timeout.count() > 0) {
    // While replies are handed out, the continuations' commands share the
    // read's clock reading (a deadline a little early, never late).
    auto now = dispatching_replies_ ? read_at_ : clock::now();
    r->deadline = now + opts_.command_timeout;
  }
  queue_.push(std::move(r));
  schedule_write();
}

// The write starts after the handlers already queued have run, so commands
// issued together share one write. Commands issued while a read hands out
// replies go out when it ends (see on_read), without a trip through the queue.
void connection_impl::schedule_write() {
  if (writing_ || write_scheduled_) return;
  if (dispatching_replies_) {
    write_wanted_ = true;
    return;
  }
  write_scheduled_ = true;
  asio::post(executor_, [self = shared_from_this(), session = session_] {
    self->write_scheduled_ = false;
    if (session == self->session_ && !self->writing_) self->start_write();
  });
}

// Installed by the initiating function, so a cancellation emitted before the
// request reaches the executor is not lost; the work itself runs there.
void connection_impl::bind_cancellation(const request_ptr& r) {
  r->slot = asio::get_associated_cancellation_slot(*r->handler);
  if (!r->slot.is_connected()) return;
  r->slot.assign([weak = std::weak_ptr<request>(r), self = std::weak_ptr<connection_impl>(shared_from_this()),
                  executor = executor_, generation = r->generation](asio::cancellation_type t) {
    if (!cancels(t)) return;
    asio::dispatch(executor, [weak, self, generation] {
      auto req = weak.lock();
      auto impl = self.lock();
      if (!req || !impl || !req->live() || req->generation != generation) return;
      // Abandoned: if unwritten it is skipped, else its reply is dropped.
      impl->finish(*req, asio::error::operation_aborted, reply(), completion::post, true);
    });
  });
}

void connection_impl::start_write() {
  batch_.clear();
  std::size_t n = queue_.stage(batch_, [](const request_ptr& r) { return !r->live(); });
  if (n == 0) return;
  out_.clear();
  out_written_ = 0;
  for (auto& r : batch_) {
    if (r->script) choose_script_form(*r);
    out_ += r->use_eval ? r->eval_wire : r->wire;
  }
  batch_.clear();
  stats_.commands += n;
  writing_ = true;
  write_rest();
}

// Tries the write at once: the socket usually takes it all, and then no
// completion has to go round the scheduler. What is left goes asynchronously.
void connection_impl::write_rest() {
  if (tls_) return do_write();  // TLS records are written by the stream
  error_code ec;
  std::size_t n = socket_.write_some(asio::buffer(out_.data() + out_written_, out_.size() - out_written_), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) return do_write();
  wrote(ec, n);
}

void connection_impl::do_write() {
  auto rest = asio::buffer(out_.data() + out_written_, out_.size() - out_written_);
  auto done = [self = shared_from_this(), session = session_, tls = tls_](error_code ec, std::size_t n) {
    self->on_write(session, ec, n);
  };
  if (tls_) return tls_->async_write_some(rest, std::move(done));
  socket_.async_write_some(rest, std::move(done));
}

void connection_impl::on_write(std::uint64_t session, error_code ec, std::size_t n) {
  if (session != session_ || !session_open_) return;
  wrote(ec, n);
}

// After one write call, at once or asynchronously.
void connection_impl::wrote(error_code ec, std::size_t n) {
  ++stats_.writes;
  if (ec) return lose(error::connection_lost);
  out_written_ += n;
  if (out_written_ < out_.size()) return do_write();
  writing_ = false;
  if (queue_.has_waiting()) schedule_write();
}

// A speculative read right after a reply usually finds the socket empty (one
// EAGAIN per round trip). Waiting for readiness instead costs Asio an
// epoll_ctl per wait, the same price, so the plain read stays.
void connection_impl::start_read() {
  auto done = [self = shared_from_this(), session = session_, tls = tls_](error_code ec, std::size_t n) {
    self->on_read(session, ec, n);
  };
  if (tls_) return tls_->async_read_some(asio::buffer(in_), std::move(done));
  socket_.async_read_some(asio::buffer(in_), std::move(done));
}

void connection_impl::on_read(std::uint64_t session, error_code ec, std::size_t n) {
  if (session != session_ || !session_open_) return;
  if (ec) return lose(error::connection_lost);
  parser_.feed(in_.data(), n);
  if (opts_.command_timeout.count() > 0) read_at_ = clock::now();
  dispatching_replies_ = true;
  error_code broken = dispatch_replies(session);
  dispatching_replies_ = false;
  if (broken) return lose(broken);
  if (session != session_) return;  // a continuation closed the connection
  start_read();
  if (write_wanted_) {
    write_wanted_ = false;
    if (!writing_) start_write();
  }
}

// Hands out every complete reply in the buffer; their continuations may run
// in place and issue the next commands.
error_code connection_impl::dispatch_replies(std::uint64_t session) {
  for (;;) {
    reply r;
    auto result = parser_.next(r);
    if (result == reply_parser::result::none) return {};
    if (result == reply_parser::result::protocol_error) return error::protocol_error;
    on_reply(std::move(r));
    if (session != session_) return {};  // on_reply lost the session
  }
}

void connection_impl::on_reply(reply r) {
  request_ptr req = queue_.pop_answered();
  if (!req) return lose(error::protocol_error);  // a reply nobody asked for
  ++stats_.replies;
  if (!req->live()) return recycle(std::move(req));  // abandoned: dropped, the stream stays in sync
  error_code ec;
  if (r.is_error()) {
    ec = classify_error(r.string());
    if (ec == error::no_script && req->script && !req->use_eval) {
      if (retry_as_eval(req)) return;
      ec = error::script_not_run;
    }
  }
  finish(*req, ec, std::move(r), completion::dispatch);
  recycle(std::move(req));
}

// ---- scripts: EVAL first, then EVALSHA, never out of order ----
// A script's first use on a session goes as EVAL, which loads it; as the
// server runs commands in order, every later use can go as EVALSHA, even in
// the same write. Decided when the request is written, so a first use
// abandoned before being sent does not count.

bool connection_impl::script_loaded(const script::data& s) const noexcept {
  for (const auto& known : loaded_scripts_)
    if (known.get() == &s || known->sha1 == s.sha1) return true;
  return false;
}

void connection_impl::choose_script_form(request& r) {
  if (!r.use_eval && script_loaded(*r.script)) return;  // the usual case: EVALSHA
  if (!r.use_eval) {
    build_eval_form(r);
    r.use_eval = true;
  }
  constexpr std::size_t max_loaded = 64;  // many one-off scripts: start over rather than grow
  if (loaded_scripts_.size() >= max_loaded) loaded_scripts_.clear();
  if (!script_loaded(*r.script)) loaded_scripts_.push_back(r.script);
}

// An EVALSHA answered NOSCRIPT: the server's cache was flushed since the
// script was loaded. Sending it again as EVAL keeps the issue order only if
// nothing was written after it; then it goes first among the waiting
// requests. Otherwise the caller gets script_not_run (false). Either way
// every script goes as EVAL again.
bool connection_impl::retry_as_eval(request_ptr& r) {
  loaded_scripts_.clear();
  if (queue_.in_flight_size() != 0) return false;
  build_eval_form(*r);
  r->use_eval = true;
  queue_.push_first(std::move(r));
  schedule_write();
  return true;
}

// Requests made by dlock's own locks (see make_request) come back here once
// answered, unless something else still holds them.
void connection_impl::recycle(request_ptr r) {
  constexpr std::size_t max_spares = 256;
  if (r.use_count() != 1 || spare_.size() >= max_spares) return;
  r->wire.clear();
  r->eval_wire.clear();
  r->script.reset();
  r->tail_offset = 0;
  r->deadline = clock::time_point::max();
  r->internal = r->use_eval = r->in_place = false;
  ++r->generation;
  spare_.push_back(std::move(r));
}

request_ptr connection_impl::make_request() {
  if (spare_.empty()) return std::make_shared<request>();
  request_ptr r = std::move(spare_.back());
  spare_.pop_back();
  return r;
}

// `post` wherever the caller may be inside an initiating function or walking
// the queue (refusals, cancellation, deadlines, loss); `dispatch` for replies.
// A direct continuation runs in place only then, so it may dispatch in turn.
void connection_impl::finish(request& r, error_code ec, reply value, completion how, bool from_slot) {
  if (!from_slot && r.slot.is_connected()) r.slot.clear();
  r.slot = {};
  if (r.sink) return deliver_to_sink(r, ec, std::move(value), how);
  handler_type handler(std::move(*r.handler));
  r.handler.reset();
  if (how == completion::post) return post_completion(executor_, std::move(handler), ec, std::move(value));
  complete_from_handler(r.in_place, executor_, std::move(handler), ec, std::move(value));
}

void connection_impl::deliver_to_sink(request& r, error_code ec, reply value, completion how) {
  auto sink = std::move(r.sink);
  r.sink.reset();
  if (how == completion::dispatch && r.in_place) return sink->on_reply(r.sink_index, ec, std::move(value));
  auto executor = sink->sink_executor();
  auto deliver = [sink = std::move(sink), index = r.sink_index, ec, value = std::move(value)]() mutable {
    sink->on_reply(index, ec, std::move(value));
  };
  if (how == completion::post) asio::post(executor, std::move(deliver));
  else asio::dispatch(executor, std::move(deliver));
}

// ---- deadlines: one timer for all commands ----
// Commands are queued in order with the same timeout, so deadlines rise along
// the queue: the timer sleeps until the oldest live one. When idle it wakes
// once per timeout, which is soon enough to catch any command issued since.

void connection_impl::arm_deadline_timer() {
  if (opts_.command_timeout.count() <= 0 || closed_) return;
  auto next = clock::now() + opts_.command_timeout;
  queue_.visit([&](const request_ptr& r) {
    if (!r->live()) return true;
    next = std::min(next, r->deadline);
    return false;
  });
  deadline_timer_.expires_at(next);
  deadline_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->closed_) return;
    self->check_deadlines();
    self->arm_deadline_timer();
  });
}

// The oldest unanswered command (timed out, abandoned, e.g. by Redlock's
// own master timeout, or not) waited a full timeout with nothing at all read
// since it was issued: the server is silent (stopped, or a black hole that
// sends no RST), so the connection resets rather than keep every timed-out
// command in flight until TCP gives up. A slow server that still answers
// earlier commands is not silent.
void connection_impl::check_deadlines() {
  auto now = clock::now();
  queue_.visit([&](const request_ptr& r) {
    if (!r->live()) return true;
    if (r->deadline > now) return false;
    finish(*r, error::timed_out, reply(), completion::post);
    return true;
  });
  const request_ptr* oldest = queue_.oldest_in_flight();
  bool server_silent = session_open_ && oldest && (*oldest)->deadline <= now &&
                       read_at_ <= (*oldest)->deadline - opts_.command_timeout;
  if (!server_silent) return;
  dlock::detail::log(dlock::log_level::warning,
                     "dlock.redis: nothing heard from the server within command_timeout, resetting the connection");
  lose(error::timed_out);
}

// ---- the session: connect, handshake, lose, reconnect ----

void connection_impl::connect(handler_type0 handler) {
  if (closed_) return post_completion(executor_, std::move(handler), error_code(dlock::error::closed));
  if (!options_invalid_reason(opts_).empty())
    return post_completion(executor_, std::move(handler), error_code(dlock::error::invalid_argument));
  if (state_ == connection_state::connected) return post_completion(executor_, std::move(handler), error_code());
  add_waiter(connection_state::connected, true, std::move(handler));
  if (running_) return;
  running_ = true;
  arm_deadline_timer();
  asio::co_spawn(executor_, run(), asio::detached);
}

asio::awaitable<void> connection_impl::run() {
  auto self = shared_from_this();  // alive until the loop ends
  backoff_ = opts_.reconnect_min;
  while (!closed_) {
    set_state(connection_state::connecting);
    error_code ec = co_await connect_once();
    if (closed_) break;
    if (!ec) {
      ++stats_.connects;
      backoff_ = opts_.reconnect_min;
      set_state(connection_state::connected);
      notify_connect({});
      if (session_open_) {
        session_end_.expires_at(clock::time_point::max());
        co_await session_end_.async_wait(tuple_token);
      }
      if (closed_) break;
      dlock::detail::log(dlock::log_level::warning, "dlock.redis: connection lost, reconnecting");
    } else {
      lose(ec);
      notify_connect(ec);
    }
    if (closed_ || !opts_.reconnect) break;
    set_state(connection_state::disconnected);
    backoff_timer_.expires_after(next_backoff());
    co_await backoff_timer_.async_wait(tuple_token);
  }
  close();
}

clock::duration connection_impl::next_backoff() {
  // Full jitter on the upper half, so many clients do not reconnect in step.
  auto current = std::chrono::duration_cast<std::chrono::milliseconds>(backoff_);
  backoff_ = std::min<clock::duration>(backoff_ * 2, opts_.reconnect_max);
  auto half = current.count() / 2;
  std::uniform_int_distribution<long long> jitter(0, half > 0 ? half : 0);
  return std::chrono::milliseconds(current.count() - half + jitter(random_));
}

asio::awaitable<error_code> connection_impl::connect_once() {
  std::uint64_t attempt = ++attempt_;
  connect_timed_out_ = false;
  connect_timer_.expires_after(opts_.connect_timeout);
  connect_timer_.async_wait([self = shared_from_this(), attempt](error_code ec) {
    if (ec || self->attempt_ != attempt || self->state_ != connection_state::connecting) return;
    self->connect_timed_out_ = true;
    self->resolver_.cancel();
    error_code ignored;
    self->socket_.close(ignored);
    self->lose(error::timed_out);
  });

  auto resolving = resolver_.async_resolve(opts_.host, std::to_string(opts_.port), tuple_token);
  auto [resolve_ec, endpoints] = co_await std::move(resolving);
  error_code ec = resolve_ec;
  if (!ec) {
    auto connecting = asio::async_connect(socket_, endpoints, tuple_token);
    auto [connect_ec, endpoint] = co_await std::move(connecting);
    ec = connect_ec;
  }
  if (!ec && !closed_) {
    socket_.set_option(asio::ip::tcp::no_delay(true), ec);
    if (!ec) socket_.non_blocking(true, ec);  // for write_rest's first try
    // A child the program execs must not inherit the connection (Asio opens
    // sockets without close-on-exec).
    if (!ec) ::fcntl(socket_.native_handle(), F_SETFD, FD_CLOEXEC);
  }
  if (!ec && !closed_ && opts_.tls.enabled) ec = co_await tls_handshake();
  if (!ec && !closed_) {
    session_open_ = true;
    ++session_;
    writing_ = false;
    parser_.reset();
    start_read();
    ec = co_await handshake();
  }
  connect_timer_.cancel();
  if (connect_timed_out_) ec = error::timed_out;
  if (closed_) ec = dlock::error::closed;
  co_return ec;
}

// The greeting commands, in order (built outside any co_await: g++ 12).
static std::vector<command> greeting(const options& o) {
  std::vector<command> out;
  if (!o.password.empty()) {
    command auth;
    auth.arg(std::string_view("AUTH"));
    if (!o.username.empty()) auth.arg(o.username);
    auth.arg(o.password);
    out.push_back(std::move(auth));
  }
  if (o.database != 0) {
    command select;
    select.arg(std::string_view("SELECT")).arg(o.database);
    out.push_back(std::move(select));
  }
  if (!o.client_name.empty()) {
    command setname;
    setname.arg(std::string_view("CLIENT")).arg(std::string_view("SETNAME")).arg(o.client_name);
    out.push_back(std::move(setname));
  }
  return out;
}

asio::awaitable<error_code> connection_impl::tls_handshake() {
  error_code ec;
  if (!tls_context_) tls_context_ = make_tls_context(opts_.tls, ec);
  if (ec) co_return ec;
  // Held here too: the connect timeout's lose() may drop tls_ mid-handshake.
  auto stream = std::make_shared<tls_stream>(socket_, *tls_context_);
  tls_ = stream;
  const std::string& name = opts_.tls.server_name.empty() ? opts_.host : opts_.tls.server_name;
  if (opts_.tls.verify_peer) stream->set_verify_callback(asio::ssl::host_name_verification(name));
  error_code not_an_address;
  asio::ip::make_address(name, not_an_address);
  if (not_an_address) SSL_set_tlsext_host_name(stream->native_handle(), name.c_str());  // SNI takes names only
  auto handshaking = stream->async_handshake(asio::ssl::stream_base::client, tuple_token);
  auto [handshake_ec] = co_await std::move(handshaking);
  if (handshake_ec) tls_.reset();
  co_return handshake_ec;
}

// The greeting (AUTH, SELECT, CLIENT SETNAME), after any TLS handshake.
asio::awaitable<error_code> connection_impl::handshake() {
  std::vector<command> commands = greeting(opts_);
  for (auto& c : commands) {
    error_code ec = co_await internal_exec(std::move(c));
    if (ec) co_return ec;
  }
  co_return error_code();
}

asio::awaitable<error_code> connection_impl::internal_exec(command cmd) {
  auto r = std::make_shared<request>();
  r->internal = true;
  r->wire = std::move(cmd).take_encoded();
  auto self = shared_from_this();
  auto op = asio::async_initiate<decltype(tuple_token), void(error_code, reply)>(
      [self, r](auto handler) {
        r->handler.emplace(std::move(handler));
        self->enqueue(r);
      },
      tuple_token);
  auto [ec, value] = co_await std::move(op);
  if (ec && value.is_error())
    dlock::detail::log(dlock::log_level::error, "dlock.redis: handshake refused: " + std::string(value.string()));
  co_return ec;
}

// Every command still pending fails with connection_lost whatever `why` is
// (it may or may not have run), or with closed after close().
void connection_impl::lose(error_code why) {
  if (!session_open_ && queue_.empty()) return;
  if (why == error::protocol_error)
    dlock::detail::log(dlock::log_level::warning,
                       "dlock.redis: the server sent bytes that answer no command, resetting the connection");
  error_code pending_error = why == dlock::error::closed ? error_code(dlock::error::closed)
                                                          : error_code(error::connection_lost);
  session_open_ = false;
  loaded_scripts_.clear();  // the next session may reach a restarted server
  ++session_;
  writing_ = false;
  write_wanted_ = false;
  error_code ignored;
  // Commands written on this session may still be on their way (a silent
  // server, a partition), and TCP would go on sending them after the close:
  // a SET NX arriving after the heal would lock for a client that gave up on
  // it. An abortive close (RST) drops them.
  if (!queue_.empty()) socket_.set_option(asio::socket_base::linger(true, 0), ignored);
  socket_.close(ignored);
  tls_.reset();  // a new session gets a new TLS stream
  parser_.reset();
  queue_.drain([&](request_ptr& r) {
    if (r->live()) finish(*r, pending_error, reply(), completion::post);
  });
  session_end_.cancel();
}

void connection_impl::close() {
  if (closed_) return;
  closed_ = true;
  lose(dlock::error::closed);
  error_code ignored;
  socket_.close(ignored);
  resolver_.cancel();
  deadline_timer_.cancel();
  session_end_.cancel();
  backoff_timer_.cancel();
  connect_timer_.cancel();
  set_state(connection_state::closed);
}

// ---- state waiters ----

void connection_impl::wait_for(connection_state target, handler_type0 handler) {
  if (state_ == target) return post_completion(executor_, std::move(handler), error_code());
  if (closed_) return post_completion(executor_, std::move(handler), error_code(dlock::error::closed));
  add_waiter(target, false, std::move(handler));
}

void connection_impl::add_waiter(connection_state target, bool connect, handler_type0 handler) {
  auto slot = asio::get_associated_cancellation_slot(handler);
  auto it = waiters_.insert(waiters_.end(), waiter{std::move(handler), slot, target, connect});
  if (!slot.is_connected()) return;
  waiter* id = &*it;
  slot.assign([self = std::weak_ptr<connection_impl>(shared_from_this()), id](asio::cancellation_type t) {
    auto impl = self.lock();
    if (!impl || !cancels(t)) return;
    for (auto i = impl->waiters_.begin(); i != impl->waiters_.end(); ++i)
      if (&*i == id) return impl->complete_waiter(i, asio::error::operation_aborted, true);
  });
}

void connection_impl::complete_waiter(std::list<waiter>::iterator it, error_code ec, bool from_slot) {
  if (!from_slot && it->slot.is_connected()) it->slot.clear();
  auto handler = std::move(it->handler);
  waiters_.erase(it);
  post_completion(executor_, std::move(handler), ec);
}

void connection_impl::set_state(connection_state s) {
  state_ = s;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    auto next = std::next(it);
    if (s == connection_state::closed) complete_waiter(it, it->target == s ? error_code() : dlock::error::closed);
    else if (!it->connect && it->target == s) complete_waiter(it, {});
    it = next;
  }
}

void connection_impl::notify_connect(error_code ec) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    auto next = std::next(it);
    if (it->connect) complete_waiter(it, ec);
    it = next;
  }
}

// ---- encoded commands, Redlock's fan-outs ----

// Built in one buffer: header, EVALSHA, the sha1, then numkeys/keys/args.
// Returns it and where numkeys starts (for the EVAL form).
std::pair<std::string, std::size_t> evalsha_wire(const script::data& s, const command& tail) {
  std::string wire;
  wire.reserve(64 + tail.body().size());
  wire += '*';
  wire += std::to_string(tail.size() + 2);
  wire += "\r\n$7\r\nEVALSHA\r\n$40\r\n";
  wire += s.sha1;
  wire += "\r\n";
  std::size_t tail_offset = wire.size();
  wire += tail.body();
  return {std::move(wire), tail_offset};
}

encoded_command encode(command cmd) { return {std::move(cmd).take_encoded(), nullptr, 0}; }

encoded_command encode_eval(const script& s, const command& tail) {
  auto wire = evalsha_wire(*s.shared(), tail);
  return {std::move(wire.first), s.shared(), wire.second};
}

namespace {

void set_command(request& r, encoded_command cmd) {
  r.wire = std::move(cmd.wire);
  r.script = std::move(cmd.script);
  r.tail_offset = cmd.tail_offset;
}

}  // namespace

request_handle connection_access::send(connection& c, const encoded_command& cmd, std::shared_ptr<reply_sink> sink,
                                       std::size_t index, bool on_executor) {
  auto& impl = *c.impl_;
  request_ptr r = on_executor ? impl.make_request() : std::make_shared<request>();
  set_command(*r, cmd);
  r->in_place = on_executor;
  r->sink = std::move(sink);
  r->sink_index = index;
  request_handle handle{r, r->generation};
  if (on_executor) impl.enqueue(std::move(r));
  else asio::dispatch(impl.executor(), [impl = c.impl_, r = std::move(r)]() mutable { impl->enqueue(std::move(r)); });
  return handle;
}

void connection_access::abandon(connection& c, request_handle handle) {
  asio::dispatch(c.impl_->executor(), [impl = c.impl_, handle = std::move(handle)] {
    auto r = handle.sent.lock();
    if (r && r->generation == handle.generation && r->live())
      impl->finish(*r, asio::error::operation_aborted, reply(), connection_impl::completion::post);
  });
}

void connection_access::submit(connection_impl& impl, encoded_command cmd, handler_type handler) {
  auto r = impl.make_request();
  set_command(*r, std::move(cmd));
  r->in_place = true;
  r->handler.emplace(std::move(handler));
  impl.bind_cancellation(r);
  impl.enqueue(std::move(r));
}

}  // namespace detail

// ---- the handle ----

connection::connection(asio::any_io_executor executor, options opts)
    : impl_(std::make_shared<detail::connection_impl>(std::move(executor), std::move(opts))) {}

connection::~connection() { close(); }
connection::connection(connection&&) noexcept = default;
connection& connection::operator=(connection&& other) noexcept {
  if (this != &other) {
    close();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

asio::any_io_executor connection::get_executor() const noexcept { return impl_->executor(); }
const options& connection::get_options() const noexcept { return impl_->opts(); }
connection_state connection::state() const noexcept { return impl_->state(); }
connection_stats connection::stats() const noexcept { return impl_->stats(); }

void connection::close() {
  if (!impl_) return;
  asio::dispatch(impl_->executor(), [impl = impl_] { impl->close(); });
}

void connection::start_connect(handler_type0 handler) {
  asio::dispatch(impl_->executor(),
                 [impl = impl_, h = std::move(handler)]() mutable { impl->connect(std::move(h)); });
}

void connection::start_wait(connection_state target, handler_type0 handler) {
  asio::dispatch(impl_->executor(), [impl = impl_, target, h = std::move(handler)]() mutable {
    impl->wait_for(target, std::move(h));
  });
}

void connection::start_exec(std::string wire, std::shared_ptr<const script::data> fallback,
                            std::size_t tail_offset, handler_type handler, bool in_place) {
  if (!fallback && detail::refused_command(wire))  // would shift every later reply: see exec()
    return dlock::detail::post_completion(impl_->executor(), std::move(handler),
                                          error_code(dlock::error::invalid_argument), reply());
  auto r = std::make_shared<detail::request>();
  detail::set_command(*r, {std::move(wire), std::move(fallback), tail_offset});
  r->in_place = in_place;
  r->handler.emplace(std::move(handler));
  impl_->bind_cancellation(r);
  asio::dispatch(impl_->executor(), [impl = impl_, r = std::move(r)]() mutable { impl->enqueue(std::move(r)); });
}

void connection::start_eval(std::shared_ptr<const script::data> s, const command& tail, handler_type handler,
                            bool in_place) {
  auto wire = detail::evalsha_wire(*s, tail);
  start_exec(std::move(wire.first), std::move(s), wire.second, std::move(handler), in_place);
}

}  // namespace dlock::redis
