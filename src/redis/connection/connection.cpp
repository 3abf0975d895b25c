// The connection's glue for commands: the socket's reads and writes, the one
// deadline timer, completions. What to write, which request a reply answers
// and what expires is the multiplexer's to decide (multiplexer.hpp); the
// session around it is in connection_session.cpp.
#include "redis/connection/connection_impl.hpp"

#include "redis/connection/sentinel.hpp"

#include "detail/op_base.hpp"

#include <dlock/error.hpp>
#include <dlock/log.hpp>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>

#include <algorithm>
#include <utility>

namespace dlock::redis::detail {
void completion_target::complete(completion how, const asio::any_io_executor& fallback, error_code ec,
                                 reply&& value) {
  if (sink_) return complete_sink(how, ec, std::move(value));
  using dlock::detail::completion;
  auto mode = how == detail::completion::post ? completion::post
              : in_place_                     ? completion::in_place
                                              : completion::dispatch;
  op_.complete(mode, fallback, ec, std::move(value));
}

void completion_target::complete_sink(completion how, error_code ec, reply&& value) {
  auto sink = std::move(sink_);
  sink_.reset();
  if (how == completion::dispatch && in_place_) return sink->on_reply(index_, ec, value);
  auto executor = sink->sink_executor();
  auto deliver = [sink = std::move(sink), index = index_, ec, value = std::move(value)]() mutable {
    sink->on_reply(index, ec, value);
  };
  if (how == completion::post) asio::post(executor, std::move(deliver));
  else asio::dispatch(executor, std::move(deliver));
}

// ---- commands ----

void connection_impl::enqueue(request_ptr r) {
  if (!r->owed) return;  // cancelled before it reached the executor
  if (error_code refused = life_.refusal(r->internal)) {
    r->settle();
    return complete(*r, refused, reply(), completion::post);
  }
  mux_.add(std::move(r), deadline_base());
  schedule_write();
}

namespace {

// The clock reading of the read whose replies are being handed out on this
// thread, if any. A Redlock reply's continuation sends its next commands to
// every master: those connections take their deadlines from it too.
thread_local const clock::time_point* handing_out_since = nullptr;

// The speed trick (DLOCK_SPEED_TRICKS): the bytes of a write are staged in
// one buffer per thread, shared by its connections, and written at once;
// only what a socket does not take is copied into the connection's own.
// With many connections, each one's own buffer would be cold by its next
// write, and copying a batch into it would miss the cache on every line.
// Without the trick, each connection stages into a buffer of its own.
std::string& staging_buffer(std::string& own) {
  if constexpr (!speed_tricks) return own;
  thread_local std::string buffer;
  return buffer;
}
void release_staging_buffer(std::string& buffer) {
  constexpr std::size_t kept = std::size_t(1) << 16;  // a huge batch does not stay allocated
  if (buffer.capacity() > kept) std::string().swap(buffer);
}
// The connection handing out replies on this thread, if any: other
// connections on its executor leave their writes with it (schedule_write).
thread_local connection_impl* handing_out_connection = nullptr;

}  // namespace

// One hand-out of a read's replies, on this thread: the read's clock reading
// and this connection (for the others' deferred writes) published, this
// connection's own writes held back. A handler run in place may throw, and
// Asio lets the exception leave run(); the application may then call run()
// again. So all of it is undone on unwinding too, and what the end of the
// hand-out does (write the deferred writes, hand out the replies already
// read, read again) is posted rather than lost: else this connection would
// never read again, nor would the connections that left their writes with it
// ever write. On the usual path this costs one flag.
class connection_impl::hand_out_scope {
 public:
  hand_out_scope(connection_impl& c, std::uint64_t session, const clock::time_point* read_at) noexcept
      : c_(c),
        session_(session),
        outer_(std::exchange(handing_out_since, read_at)),
        outer_connection_(std::exchange(handing_out_connection, &c)) {
    c_.plan_.on_hand_out_begins();
  }
  ~hand_out_scope() {
    handing_out_since = outer_;
    handing_out_connection = outer_connection_;
    c_.plan_.on_hand_out_ends();
    if (!finished_) c_.resume_hand_out_later(session_);
  }
  hand_out_scope(const hand_out_scope&) = delete;
  hand_out_scope& operator=(const hand_out_scope&) = delete;
  /// Every reply was handed out: the caller ends the hand-out itself.
  void finished() noexcept { finished_ = true; }

 private:
  connection_impl& c_;
  std::uint64_t session_;
  const clock::time_point* outer_;
  connection_impl* outer_connection_;
  bool finished_ = false;
};

clock::time_point recent_now() noexcept { return handing_out_since ? *handing_out_since : clock::now(); }

// While replies are handed out, the continuations' commands share the read's
// clock reading (a deadline a little early, never late); no reading at all
// without a command timeout.
clock::time_point connection_impl::deadline_base() const {
  if (!mux_.timed()) return {};
  if (plan_.handing_out()) return mux_.last_read();
  if (!handing_out_since) return clock::now();
  // Another connection's reading, maybe older than this one's last read on
  // another thread: never before it, or the silence check would take this
  // command for one sent before that read and never see the server silent.
  return std::max(*handing_out_since, mux_.last_read());
}

// Who writes, and when: see write_plan (multiplexer.hpp).
void connection_impl::schedule_write() {
  if (!mux_.wants_write()) return;
  auto* other = handing_out_connection;
  bool other_handing_out = other && other != this && other->executor_ == executor_;
  switch (plan_.on_queued(other_handing_out)) {
    case write_plan::action::none: return;
    case write_plan::action::leave_with_hand_out:
      other->deferred_writes_.emplace_back(shared_from_this(), session_);
      return;
    case write_plan::action::post:
      asio::post(executor_, [self = shared_from_this(), session = session_] {
        self->plan_.on_due_write_runs();
        if (session == self->session_) self->start_write();
      });
  }
}

// Installed by the initiating function, so a cancellation emitted before the
// request reaches the executor is not lost; the work itself runs there.
void connection_impl::bind_cancellation(const request_ptr& r) {
  r->target.hook_cancellation(executor_, [handle = request_handle{r, r->generation},
                                          self = std::weak_ptr<connection_impl>(shared_from_this())](
                                             asio::cancellation_type) {
    if (auto impl = self.lock()) impl->abandon(handle);
  });
}

// Abandoned: if unwritten it is skipped, else its reply is dropped.
void connection_impl::abandon(const request_handle& handle) {
  auto r = handle.sent.lock();
  if (r && mux_.abandon(*r, handle.generation))
    complete(*r, asio::error::operation_aborted, reply(), completion::post);
}

// Tries the write at once: the socket usually takes it all, and then no
// completion has to go round the scheduler. What is left goes asynchronously.
// TLS records are written by the stream, always asynchronously.
void connection_impl::start_write() {
  std::string& staging = staging_buffer(own_staging_);
  staging.clear();
  if (mux_.prepare_write(staging) == 0) return;
  if (tls_) {
    mux_.keep_unwritten(staging);
    release_staging_buffer(staging);
    return do_write();
  }
  error_code ec;
  std::size_t n = socket_.write_some(asio::buffer(staging), ec);
  bool blocked = ec == asio::error::would_block || ec == asio::error::try_again;
  if (ec) n = 0;
  // Released before anything else runs: a completion may write on another connection.
  mux_.keep_unwritten(std::string_view(staging).substr(n));
  release_staging_buffer(staging);
  if (blocked) return do_write();
  wrote(ec, 0);
}

void connection_impl::do_write() {
  auto rest = mux_.unwritten();
  auto done = [self = shared_from_this(), session = session_, tls = tls_](error_code ec, std::size_t n) {
    if (session == self->session_) self->wrote(ec, n);
  };
  if (tls_) return tls_->async_write_some(asio::buffer(rest.data(), rest.size()), std::move(done));
  socket_.async_write_some(asio::buffer(rest.data(), rest.size()), std::move(done));
}

// After one write call, at once or asynchronously.
void connection_impl::wrote(error_code ec, std::size_t n) {
  ++stats_.writes;
  if (ec) return lose(error::connection_lost);
  if (!mux_.commit_write(n)) return do_write();
  schedule_write();  // what was queued meanwhile
}

// A speculative read right after a reply usually finds the socket empty (one
// EAGAIN per round trip). Waiting for readiness instead costs Asio an
// epoll_ctl per wait, the same price, so the plain read stays.
// Keeps the connection for its pending read. Asio destroys a handler
// without calling it only when its io_context is destroyed with the handler
// still pending: then no reply will ever come, and the commands in flight
// are destroyed uncalled, as Asio destroys its own pending handlers. Else
// they would keep this connection alive for ever: a Redlock fan-out, the
// sink of its commands, holds its redlock, which holds this connection.
class connection_impl::read_keeper {
 public:
  explicit read_keeper(std::shared_ptr<connection_impl> c) noexcept : c_(std::move(c)) {}
  read_keeper(read_keeper&&) noexcept = default;  // leaves the source empty
  read_keeper& operator=(read_keeper&&) = delete;
  ~read_keeper() {
    if (c_) c_->drop_pending();
  }
  /// The read completed: the connection, no longer dropped with the handler.
  std::shared_ptr<connection_impl> take() noexcept { return std::move(c_); }

 private:
  std::shared_ptr<connection_impl> c_;
};

void connection_impl::drop_pending() {
  ++session_;
  settled_.clear();
  mux_.reset(settled_);
  for (auto& r : settled_) r->target.clear();  // a pooled request keeps no handler, no sink
  settled_.clear();
  deferred_writes_.clear();
  waiters_.clear();
}

void connection_impl::start_read() {
  auto done = [keeper = read_keeper(shared_from_this()), session = session_, tls = tls_](error_code ec,
                                                                                           std::size_t n) mutable {
    keeper.take()->on_read(session, ec, n);
  };
  if (tls_) return tls_->async_read_some(asio::buffer(in_), std::move(done));
  socket_.async_read_some(asio::buffer(in_), std::move(done));
}

void connection_impl::on_read(std::uint64_t session, error_code ec, std::size_t n) {
  if (session != session_) return;
  if (ec) return lose(error::connection_lost);
  parser_.feed(in_.data(), n);
  clock::time_point read_at{};
  if (mux_.timed()) mux_.note_read(read_at = clock::now());
  hand_out_read(session, read_at);
}

// Hands out the replies read so far, writes what they led to, reads again.
void connection_impl::hand_out_read(std::uint64_t session, clock::time_point read_at) {
  error_code broken;
  {
    hand_out_scope scope(*this, session, mux_.timed() ? &read_at : nullptr);
    broken = hand_out_replies(session);
    scope.finished();
  }
  write_deferred();
  if (broken) return lose(broken);
  if (session != session_) return;  // a continuation closed the connection
  // The commands the replies led to leave before the read is re-armed: that
  // read usually finds nothing yet, and they need not wait for it.
  if (plan_.take_wanted()) {
    start_write();
    if (session != session_) return;  // the write failed: the connection was lost
  }
  start_read();
}

// A handler threw out of a hand-out (see hand_out_scope): the rest of it runs
// from the queue. Not here, while the exception unwinds: it runs handlers,
// and a second exception now would end the process.
void connection_impl::resume_hand_out_later(std::uint64_t session) noexcept {
  try {
    asio::post(executor_, [self = shared_from_this(), session] { self->resume_hand_out(session); });
  } catch (...) {
    // Nothing can be queued (no memory): at least the connections that left
    // their writes here schedule their next ones themselves.
    for (auto& deferred : deferred_writes_) deferred.first->plan_.on_due_write_runs();
    deferred_writes_.clear();
  }
}

void connection_impl::resume_hand_out(std::uint64_t session) {
  // The replies the throwing one came with: read already, no more bytes may come for them.
  if (session == session_) return hand_out_read(session, mux_.last_read());
  write_deferred();  // this session ended meanwhile; the other connections still write
}

// The writes other connections left with this hand-out; one write each.
void connection_impl::write_deferred() {
  for (auto& [other, session] : deferred_writes_) {
    other->plan_.on_due_write_runs();
    if (session == other->session_) other->start_write();
  }
  deferred_writes_.clear();
}

// Hands out every complete reply in the buffer; their continuations may run
// in place and issue the next commands.
error_code connection_impl::hand_out_replies(std::uint64_t session) {
  for (;;) {
    reply r;
    auto result = parser_.next(r);
    if (result == reply_parser::result::none) return {};
    if (result == reply_parser::result::protocol_error) return error::protocol_error;
    hand_out(std::move(r));
    if (session != session_) return {};  // the session ended meanwhile
  }
}

void connection_impl::hand_out(reply&& r) {
  if (push_listener_ && is_message(r)) [[unlikely]]
    return push_listener_(r);
  auto answer = mux_.on_reply(r);
  switch (answer.what) {
    case multiplexer::answer::kind::unexpected: return lose(error::protocol_error);
    case multiplexer::answer::kind::resend: return schedule_write();
    case multiplexer::answer::kind::more: return;
    case multiplexer::answer::kind::complete: {
      bool demoted = answer.ec && answer.ec == error::read_only;  // no error_code made for a success
      if (answer.request->gather) [[unlikely]]
        r = answer.request->take_gathered(std::move(r));
      complete(*answer.request, answer.ec, std::move(r), completion::dispatch);
      mux_.recycle(std::move(answer.request));
      if (demoted) [[unlikely]]
        perform(life_.on_read_only());
      return;
    }
    case multiplexer::answer::kind::drop: mux_.recycle(std::move(answer.request));
  }
}

// Every exit of a request: its one target completed (a handler's slot released).
void connection_impl::complete(request& r, error_code ec, reply&& value, completion how) {
  r.target.complete(how, executor_, ec, std::move(value));
}

// ---- deadlines: one timer for all commands ----

void connection_impl::arm_deadline_timer() {
  if (!mux_.timed() || life_.current() == lifecycle::phase::closed) return;
  deadline_timer_.expires_at(mux_.next_deadline(clock::now()));
  deadline_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec) return;
    self->check_deadlines();
    self->arm_deadline_timer();
  });
}

void connection_impl::check_deadlines() {
  settled_.clear();
  bool server_silent = mux_.expire(clock::now(), settled_);
  for (auto& r : settled_) complete(*r, error::timed_out, reply(), completion::post);
  settled_.clear();
  if (!server_silent) return;
  dlock::detail::log(dlock::log_level::warning,
                     "dlock.redis: nothing heard from the server within command_timeout, resetting the connection");
  lose(error::timed_out);
}

// ---- the end of a session ----

// The session broke: the lifecycle says what follows (it tears down).
void connection_impl::lose(error_code why) {
  if (why == error::protocol_error)
    dlock::detail::log(dlock::log_level::warning,
                       "dlock.redis: the server sent bytes that answer no command, resetting the connection");
  perform(life_.on_lost(why));
}

// Every command still pending fails with `pending_error`: connection_lost
// whatever broke (it may or may not have run), or closed after close().
void connection_impl::tear_down(error_code pending_error) {
  ++session_;
  plan_.on_session_end();
  settled_.clear();
  bool had_pending = mux_.reset(settled_);
  error_code ignored;
  // Commands written on this session may still be on their way (a silent
  // server, a partition), and TCP would go on sending them after the close:
  // a SET NX arriving after the heal would lock for a client that gave up on
  // it. An abortive close (RST) drops them.
  if (had_pending) socket_.set_option(asio::socket_base::linger(true, 0), ignored);
  socket_.close(ignored);
  tls_.reset();  // a new session gets a new TLS stream
  parser_.reset();
  for (auto& r : settled_) complete(*r, pending_error, reply(), completion::post);
  settled_.clear();
}

}  // namespace dlock::redis::detail
