// The connection's handle, the entries dlock's own locks use
// (connection_access): each builds a request and hands it to the glue on the
// connection's executor; and the locks' fan-outs over a set of connections.
#include "redis/connection/connection_api.hpp"

#include "detail/op_base.hpp"

#include <dlock/error.hpp>

#include "redis/resp/command_check.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/steady_timer.hpp>

#include <charconv>
#include <cstring>

namespace dlock::redis {
namespace detail {

// ---- encoded commands, Redlock's fan-outs ----

namespace {

// One way to append to either buffer a command is encoded into.
void append(std::string& out, std::string_view bytes) { out.append(bytes.data(), bytes.size()); }
void append(command_buffer& out, std::string_view bytes) {
  if (bytes.empty()) return;  // its data() may be null
  auto at = out.size();
  out.resize(at + bytes.size(), boost::container::default_init);
  std::memcpy(out.data() + at, bytes.data(), bytes.size());
}

template <class Buffer>
void append_count(Buffer& out, char kind, std::size_t n) {
  char digits[24];
  digits[0] = kind;
  auto end = std::to_chars(digits + 1, digits + sizeof digits - 2, n).ptr;
  *end++ = '\r';
  *end++ = '\n';
  append(out, std::string_view(digits, static_cast<std::size_t>(end - digits)));
}

template <class Buffer>
void append_bulk(Buffer& out, std::string_view argument) {
  append_count(out, '$', argument.size());
  append(out, argument);
  append(out, "\r\n");
}

// "*N", EVALSHA and the sha1: what every EVALSHA form starts with.
template <class Buffer>
void append_evalsha_head(Buffer& out, std::size_t arguments, const std::string& sha1) {
  append_count(out, '*', arguments);
  append(out, "$7\r\nEVALSHA\r\n$40\r\n");
  append(out, sha1);
  append(out, "\r\n");
}

template <class Buffer>
void append_command(Buffer& out, std::initializer_list<std::string_view> arguments) {
  append_count(out, '*', arguments.size());
  for (auto a : arguments) append_bulk(out, a);
}

// The EVALSHA form; returns where numkeys starts.
template <class Buffer>
std::size_t append_evalsha(Buffer& out, const script::data& s, std::initializer_list<std::string_view> keys,
                           std::initializer_list<std::string_view> args) {
  char numkeys[24];
  auto numkeys_end = std::to_chars(numkeys, numkeys + sizeof numkeys, keys.size()).ptr;
  append_evalsha_head(out, 3 + keys.size() + args.size(), s.sha1);
  std::size_t tail_offset = out.size();
  append_bulk(out, std::string_view(numkeys, static_cast<std::size_t>(numkeys_end - numkeys)));
  for (auto k : keys) append_bulk(out, k);
  for (auto a : args) append_bulk(out, a);
  return tail_offset;
}

}  // namespace

// Built in one buffer: header, EVALSHA, the sha1, then numkeys/keys/args.
// Returns it and where numkeys starts (for the EVAL form).
std::pair<std::string, std::size_t> evalsha_wire(const script::data& s, const command& tail) {
  std::string wire;
  wire.reserve(64 + tail.body().size());
  append_evalsha_head(wire, tail.size() + 2, s.sha1);
  std::size_t tail_offset = wire.size();
  wire += tail.body();
  return {std::move(wire), tail_offset};
}

void inline_command::set(std::initializer_list<std::string_view> arguments) {
  wire.clear();
  script.reset();
  tail_offset = 0;
  replies = 1;
  gather = false;
  append_command(wire, arguments);
}

void inline_command::set_block(std::initializer_list<std::initializer_list<std::string_view>> commands,
                               bool gathers) {
  wire.clear();
  script.reset();
  tail_offset = 0;
  replies = static_cast<std::uint32_t>(commands.size());
  gather = gathers;
  for (auto arguments : commands) append_command(wire, arguments);
}

void inline_command::set(const redis::script& s, std::initializer_list<std::string_view> keys,
                         std::initializer_list<std::string_view> args) {
  wire.clear();
  script = s.shared();
  replies = 1;
  gather = false;
  tail_offset = static_cast<std::uint32_t>(append_evalsha(wire, *script, keys, args));
}

void inline_command::then(std::initializer_list<std::string_view> arguments) {
  append_command(wire, arguments);
  ++replies;
  gather = true;
}

namespace {

void set_command(request& r, encoded_command cmd) {
  r.wire = std::move(cmd.wire);
  r.run_script(std::move(cmd.script));
  r.tail_offset = static_cast<std::uint32_t>(cmd.tail_offset);
  r.replies = cmd.replies;
}

// A fan-out sends one encoded command to every master: each request borrows
// its bytes (the fan-out, their sink, keeps them while they are owed) rather
// than copying them into a buffer of its own, which would be cold by then.
// Its script too: a plain pointer, no share (no count to touch), as the
// multiplexer reads it only while the request is owed.
void borrow_command(request& r, const inline_command& cmd) {
  r.borrowed = cmd.bytes();
  r.script = cmd.script.get();
  r.tail_offset = cmd.tail_offset;
  r.replies = cmd.replies;
  r.gather = cmd.gather;
}

}  // namespace

request_handle connection_access::send(const std::shared_ptr<connection_impl>& c, const inline_command& cmd,
                                       std::shared_ptr<reply_sink> sink, std::size_t index, bool on_executor) {
  auto& impl = *c;
  request_ptr r = on_executor ? impl.make_request() : std::make_shared<request>();
  borrow_command(*r, cmd);
  r->answer_to(std::move(sink), index, on_executor);
  request_handle handle{r, r->generation};
  if (on_executor) impl.enqueue(std::move(r));
  else asio::dispatch(impl.executor(), [impl = c, r = std::move(r)]() mutable { impl->enqueue(std::move(r)); });
  return handle;
}

void connection_access::abandon(const std::shared_ptr<connection_impl>& c, request_handle handle) {
  asio::dispatch(c->executor(), [impl = c, handle = std::move(handle)] { impl->abandon(handle); });
}

void connection_access::wait_for(const std::shared_ptr<connection_impl>& c, connection_state target,
                                 handler_type0 handler) {
  auto w = c->new_waiter(target, false, std::move(handler));
  asio::dispatch(c->executor(), [impl = c, w = std::move(w)]() mutable { impl->wait_for(std::move(w)); });
}

// ---- a lock's connections, and its fan-outs ----

// One timer for the per-master deadline of every fan-out of one set: the
// deadline_queue says when it is due, and which fan-outs expire then.
class deadline_timer : public std::enable_shared_from_this<deadline_timer> {
 public:
  deadline_timer(const asio::any_io_executor& executor, std::chrono::milliseconds timeout)
      : queue_(timeout), timer_(executor) {}

  void watch(deadline_entry& entry) {
    queue_.watch(entry, clock::now());
    arm();
  }
  void unwatch(deadline_entry& entry) noexcept { queue_.unwatch(entry); }

 private:
  // Armed for the oldest watched deadline; if that fan-out finished
  // meanwhile the timer wakes a little early and re-arms for the next one.
  void arm() {
    auto due = queue_.next_due();
    if (armed_ || !due) return;
    armed_ = true;
    timer_.expires_at(*due);
    timer_.async_wait([weak = weak_from_this()](error_code) {
      if (auto self = weak.lock()) self->on_timer();
    });
  }

  void on_timer() {
    armed_ = false;
    auto now = clock::now();
    while (auto* entry = queue_.take_due(now)) {
      // A fan-out in the queue is alive (~fanout leaves it); locked so that
      // expire() may drop the last command holding it.
      auto* expiring = static_cast<fanout*>(entry->owner);
      if (auto op = expiring->weak_from_this().lock()) op->expire();  // may watch new fan-outs
    }
    arm();
  }

  deadline_queue queue_;
  asio::steady_timer timer_;
  bool armed_ = false;
};

connection_set::connection_set(asio::any_io_executor ex, std::vector<std::shared_ptr<connection_impl>> m,
                               std::chrono::milliseconds master_timeout)
    : executor(std::move(ex)), masters(std::move(m)) {
  for (const auto& master : masters) shares_executor.push_back(master->executor() == executor);
  if (master_timeout > std::chrono::milliseconds::zero())
    deadlines = std::make_shared<deadline_timer>(executor, master_timeout);
}

fanout::fanout(std::shared_ptr<connection_set> to) : to_(std::move(to)), masters_(to_->masters.size()) {
  deadline_.owner = this;
}

fanout::~fanout() {
  if (to_->deadlines) to_->deadlines->unwatch(deadline_);
}

void fanout::track(std::size_t index) {
  if (!masters_[index].in_flight) {
    masters_[index].in_flight = true;
    ++pending_;
  }
}

void fanout::send(std::size_t index) { send(index, shared_from_this()); }

// One shared_from_this() for all: each is a compare-and-swap on the count,
// where copying the pointer is a plain increment in a one-thread process.
void fanout::send_to_all() {
  auto self = shared_from_this();
  for (std::size_t i = 0; i < to_->masters.size(); ++i) send(i, self);
}

void fanout::send(std::size_t index, const std::shared_ptr<fanout>& self) {
  track(index);
  request_handle& sent = masters_[index];  // the master's state is its last request's handle
  sent = connection_access::send(to_->masters[index], command_, self, index, to_->shares_executor[index]);
}

void fanout::arm_deadline() {
  if (!to_->deadlines || deadline_.is_linked() || pending_ == 0) return;
  to_->deadlines->watch(deadline_);
}

// Out of the queue already (the timer took it out).
void fanout::expire() {
  if (pending_ == 0) return;
  deadline_passed_ = true;
  on_deadline();
  abandon_pending();
}

void fanout::abandon_pending() {
  for (std::size_t i = 0; i < masters_.size(); ++i)
    if (masters_[i].in_flight) connection_access::abandon(to_->masters[i], masters_[i]);
}

void fanout::on_reply(std::size_t index, error_code ec, const reply& answer) {
  auto& master = masters_[index];
  if (!master.in_flight) return;
  master.in_flight = false;
  // Let go of the answered request now, while it is in the cache: the
  // fan-out's end would otherwise touch every request's count again.
  master.sent.reset();
  --pending_;
  on_answer(index, ec, answer);  // may send a follow-up to the same master
  if (pending_ == 0) {
    if (to_->deadlines) to_->deadlines->unwatch(deadline_);
    on_all_answered();
  }
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
  auto w = impl_->new_waiter(connection_state::connected, true, std::move(handler));
  asio::dispatch(impl_->executor(), [impl = impl_, w = std::move(w)]() mutable { impl->connect(std::move(w)); });
}

void connection::start_wait(connection_state target, handler_type0 handler) {
  detail::connection_access::wait_for(impl_, target, std::move(handler));
}

void connection::start_exec(std::string wire, std::shared_ptr<const script::data> fallback,
                            std::size_t tail_offset, handler_type handler, bool in_place) {
  if (!fallback && detail::refused_command(wire))  // would shift every later reply: see exec()
    return dlock::detail::post_completion(impl_->executor(), std::move(handler),
                                          error_code(dlock::error::invalid_argument), reply());
  auto r = std::make_shared<detail::request>();
  detail::set_command(*r, {std::move(wire), std::move(fallback), tail_offset, 1});
  r->answer_to(std::move(handler), in_place);
  impl_->bind_cancellation(r);
  asio::dispatch(impl_->executor(), [impl = impl_, r = std::move(r)]() mutable { impl->enqueue(std::move(r)); });
}

void connection::start_eval(std::shared_ptr<const script::data> s, const command& tail, handler_type handler,
                            bool in_place) {
  auto wire = detail::evalsha_wire(*s, tail);
  start_exec(std::move(wire.first), std::move(s), wire.second, std::move(handler), in_place);
}

}  // namespace dlock::redis
