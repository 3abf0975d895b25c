#include "redis/locks/engine.hpp"

#include <dlock/log.hpp>
#include "redis/locks/token.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <utility>

namespace dlock::redis::detail {

using std::chrono::milliseconds;

// ---------------------------------------------------------------- lock_engine

lock_engine::lock_engine(asio::any_io_executor ex, std::vector<std::shared_ptr<connection_impl>> m,
                         hold_commands c, redlock_options o, lock_kind kind)
    : executor(std::move(ex)),
      masters(std::move(m)),
      commands(std::move(c)),
      options(o),
      observed(o.observer, masters.empty() ? nullptr : masters[0]->opts().observer, commands.key, kind),
      hold(executor, drift_of(o)),
      retry_pause(executor),
      unsettled(masters.size()),
      deadlines(executor, o.master_timeout),
      random_(jitter_seed()) {
  hold.observe(&observed);
  if (o.stall) hold.watch_stalls(o.stall);
  else if (!masters.empty()) hold.watch_stalls(masters[0]->opts().stall);
  names.reserve(masters.size());
  for (const auto& master : masters) {
    const auto& opts = master->opts();
    names.push_back(opts.host + ':' + std::to_string(opts.port));
    shares_executor.push_back(master->executor() == executor);
  }
}

void lock_engine::attach_hold() {
  for (const auto& master : masters) master->watch_master(std::weak_ptr<master_watcher>(weak_from_this()));
  deadlines.attach(weak_from_this());
  hold.attach(weak_from_this());
  hold.on_lost([weak = weak_from_this()](error_code why) {
    auto self = weak.lock();
    if (!self) return;
    if (dlock::detail::log_enabled(log_level::warning))
      dlock::detail::log(log_level::warning, "lock " + self->commands.key + ": lost (" + why.message() + "); " +
                                                 self->last_outcomes());
    self->release_in_background();
  });
}

namespace {

template <class Token>
auto async_extend(std::shared_ptr<lock_engine> owner, milliseconds ttl, Token&& token) {
  return asio::async_initiate<Token, void(error_code)>(
      [](auto handler, std::shared_ptr<lock_engine> o, milliseconds t) {
        start_extend(std::move(o), t, asio::any_completion_handler<void(error_code)>(std::move(handler)));
      },
      token, std::move(owner), ttl);
}

// One step of the hold's auto-extension: a Redlock extend round.
asio::awaitable<error_code> auto_extend_step(std::weak_ptr<lock_engine> weak) {
  auto self = weak.lock();
  if (!self) co_return make_error_code(dlock::error::not_held);
  auto ttl = self->options.ttl;
  auto [ec] = co_await async_extend(self, ttl, asio::as_tuple(asio::use_awaitable));
  co_return ec;
}

}  // namespace

void lock_engine::begin_hold(std::string_view token, redlock_clock::time_point start, std::int64_t fencing_token) {
  hold.begin(token, start, options.ttl, fencing_token);
  highest_fencing_token = std::max(highest_fencing_token, fencing_token);
  hold_epochs = attempt_epochs;
  check_failover();  // a master replaced while the attempt was out
  if (!options.auto_extend || !hold.held()) return;
  auto_extend_settings settings{options.ttl, options.extend_fraction, options.max_hold};
  std::weak_ptr<lock_engine> weak = weak_from_this();
  hold.extend_automatically(settings, [weak] { return auto_extend_step(weak); });
}

// ---- failover ----

void lock_engine::note_attempt_epochs() {
  attempt_epochs.resize(masters.size());
  for (std::size_t i = 0; i < masters.size(); ++i) attempt_epochs[i] = masters[i]->master_epoch();
}

// In place when the connection runs on this lock's thread: the hold is lost
// before the connection moves on to the new master.
void lock_engine::on_master_changed(std::uint64_t) {
  asio::dispatch(executor, [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->check_failover();
  });
}

void lock_engine::check_failover() {
  if (!hold.held() || hold_epochs.size() != masters.size()) return;
  boost::container::small_vector<bool, 7> replaced;
  for (std::size_t i = 0; i < masters.size(); ++i) replaced.push_back(masters[i]->master_epoch() != hold_epochs[i]);
  if (!stands_after_failover(outcomes, replaced)) hold.lose(dlock::error::failed_over);
}

bool lock_engine::fencing_went_back(std::int64_t token) {
  if (!token_went_back(token, highest_fencing_token)) return false;
  dlock::detail::log(log_level::warning, "lock " + commands.key + ": fencing token " + std::to_string(token) +
                                             " is not above " + std::to_string(highest_fencing_token) +
                                             " (a failover?): raising the counter, trying again");
  for (std::size_t i = 0; i < masters.size(); ++i) raise_counter(i, highest_fencing_token);
  return true;
}

void lock_engine::release_in_background() {
  std::make_shared<release_fanout>(shared_from_this(), hold.token())->start();
}

void lock_engine::release_in_background(std::string_view t) {
  std::make_shared<release_fanout>(shared_from_this(), t)->start();
}

void lock_engine::release_in_background(std::string_view t, std::size_t master) {
  std::make_shared<release_fanout>(shared_from_this(), t)->start(master);
}

void lock_engine::raise_counter(std::size_t master, std::int64_t token) {
  auto raise = std::make_shared<fencing_write_back>(shared_from_this(), token, 0, 1, nullptr);
  raise->send_to(master);
  raise->start();
}

void lock_engine::note_unsettled(std::size_t master, std::string attempt_token, error_code why) {
  if (!unsettled.note(master, std::move(attempt_token), why, redlock_clock::now(), options.ttl)) return;
  std::weak_ptr<lock_engine> weak = weak_from_this();
  auto on_reconnected = [weak, master](error_code ec) {
    auto self = weak.lock();  // a redlock destroyed meanwhile sends nothing
    if (!self) return;
    self->unsettled.reconnected(master);
    if (!ec) self->resend_unsettled_cleanups(master);
  };
  // On our executor: the master's connection may run on another.
  connection_access::wait_for(masters[master], connection_state::connected,
                              asio::bind_executor(executor, on_reconnected));
}

void lock_engine::resend_unsettled_cleanups() {
  if (unsettled.empty()) return;  // the common case, before every attempt
  for (std::size_t master = 0; master < masters.size(); ++master) resend_unsettled_cleanups(master);
}

void lock_engine::resend_unsettled_cleanups(std::size_t master) {
  for (auto& token : unsettled.take(master, redlock_clock::now())) release_in_background(token, master);
}

void lock_engine::cleanup_settled() {
  if (--cleanups_in_flight > 0) return;
  for (auto& w : std::exchange(settle_waiters, {})) w->op.complete(dlock::detail::completion::post, executor, {});
  if (after_cleanups) std::exchange(after_cleanups, nullptr)();
}

void lock_engine::note_outcomes(const redlock_round& round) {
  outcomes_of = &round;
  outcomes.clear();
  for (std::size_t i = 0; i < round.masters(); ++i) outcomes.push_back(round.outcome(i));
}

std::string lock_engine::last_outcomes() const {
  std::string text;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    if (i) text += ' ';
    text += names[i];
    text += '=';
    text += to_string(outcomes[i]);
  }
  return text;
}

double lock_engine::random_unit() {
  return std::uniform_real_distribution<double>(0.0, 1.0)(random_);
}

// ---------------------------------------------------------------------- fanout

fanout::fanout(std::shared_ptr<lock_engine> owner)
    : owner_(std::move(owner)), masters_(owner_->masters.size()) {
  deadline_.op = this;
}

fanout::~fanout() { owner_->deadlines.unwatch(deadline_); }

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
  for (std::size_t i = 0; i < owner_->masters.size(); ++i) send(i, self);
}

void fanout::send(std::size_t index, const std::shared_ptr<fanout>& self) {
  track(index);
  request_handle& sent = masters_[index];  // the master's state is its last request's handle
  sent = connection_access::send(owner_->masters[index], command_, self, index, owner_->shares_executor[index]);
}

void fanout::arm_deadline() {
  if (!owner_->deadlines.timed() || deadline_.is_linked() || pending_ == 0) return;
  owner_->deadlines.watch(deadline_);
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
    if (masters_[i].in_flight) connection_access::abandon(owner_->masters[i], masters_[i]);
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
    owner_->deadlines.unwatch(deadline_);
    on_all_answered();
  }
}

// ---------------------------------------------------------------- round_fanout

round_fanout::round_fanout(std::shared_ptr<lock_engine> owner, round_kind kind, milliseconds ttl,
                           redlock_clock::time_point start)
    : fanout(std::move(owner)),
      report_(*owner_, kind),
      attempt_(owner_->commands, kind, owner_->masters.size(), ttl, owner_->hold_drift(), start) {}

void round_fanout::on_answer(std::size_t index, error_code ec, const reply& answer) {
  auto reaction = attempt_.on_answer(index, ec, answer, redlock_clock::now(), deadline_passed());
  if (reaction.resend) return send(index);
  report_.answered(index, reaction.outcome, ec, attempt_.round().start());
  if (reaction.decided) return decided();
  // A late answer of the round noted last: a late yes is a master the hold stands on too.
  if (owner_->outcomes_of == &attempt_.round()) owner_->outcomes[index] = reaction.outcome;
  if (reaction.raise_counter) owner_->raise_counter(index, attempt_.round().fencing_token());
  if (reaction.release) owner_->release_in_background(round_token(), index);
}

void round_fanout::on_deadline() {
  bool decided_now = attempt_.on_deadline(redlock_clock::now());
  report_.time_out_pending(attempt_.round().start());
  if (decided_now) decided();
}

// -------------------------------------------------------------- release_fanout

release_fanout::release_fanout(std::shared_ptr<lock_engine> owner, std::string_view token, done_handler done,
                               bool in_place)
    : fanout(std::move(owner)), in_place_(in_place), done_(std::move(done)) {
  if (!done_.has_handler()) token_ = token;
  owner_->commands.release(command(), token);
}

void release_fanout::count_as_cleanup() {
  cleanup_ = !done_.has_handler();
  if (cleanup_) ++owner_->cleanups_in_flight;
}

void release_fanout::start() {
  count_as_cleanup();
  tally_.emplace(owner_->masters.size(), owner_->masters.size(), owner_->commands.one_server());
  send_to_all();
  arm_deadline();
}

void release_fanout::start(std::size_t master) {
  count_as_cleanup();
  tally_.emplace(owner_->masters.size(), 1, owner_->commands.one_server());
  send(master);
  arm_deadline();
}

void release_fanout::on_answer(std::size_t index, error_code ec, const reply& answer) {
  if (tally_->resend(ec, deadline_passed())) return send(index);
  if (ec && cleanup_) owner_->note_unsettled(index, token_, ec);
  if (auto outcome = tally_->record(ec, answer)) complete(*outcome);
}

void release_fanout::on_all_answered() {
  // With a handler, reached only when a subset was asked.
  complete(tally_->all_answered());
  if (std::exchange(cleanup_, false)) owner_->cleanup_settled();
}

void release_fanout::complete(error_code ec) {
  if (!done_.has_handler() || done_.done()) return;
  if (ends_release_) {
    owner_->releasing = false;
    owner_->released_masters = tally_->released();
  }
  done_.complete(in_place_ ? dlock::detail::completion::in_place : dlock::detail::completion::dispatch,
                 owner_->executor, ec);
}

}  // namespace dlock::redis::detail

namespace dlock::redis::detail {

// ---------------------------------------------------------- fencing_write_back

fencing_write_back::fencing_write_back(std::shared_ptr<lock_engine> owner, std::int64_t token, std::size_t needed,
                                       std::size_t asked, report_function report)
    : fanout(std::move(owner)), tally_(token, needed, asked), report_(std::move(report)) {
  auto text = std::to_string(token);
  set_command(fencing_write_back_script(), {owner_->commands.counter_key}, {text});
}

void fencing_write_back::send_to(std::size_t master) { send(master); }

void fencing_write_back::start() {
  if (auto refused = tally_.at_start()) return finish(*refused);
  arm_deadline();
}

void fencing_write_back::on_answer(std::size_t, error_code ec, const reply& answer) {
  if (auto outcome = tally_.record(ec, answer)) finish(*outcome);
}

void fencing_write_back::finish(error_code ec) {
  if (auto report = std::exchange(report_, nullptr)) report(ec);
}

}  // namespace dlock::redis::detail
