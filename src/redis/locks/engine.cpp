#include "redis/locks/engine.hpp"

#include <dlock/log.hpp>
#include "redis/locks/token.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <utility>

namespace dlock::redis::detail {

using std::chrono::milliseconds;

// ---------------------------------------------------------------- lock_engine

lock_engine::lock_engine(asio::any_io_executor ex, std::vector<std::shared_ptr<connection_impl>> m,
                         hold_commands c, redlock_options o, lock_kind kind, std::string invalid)
    : connection_set(std::move(ex), std::move(m), o.master_timeout),
      unusable(!invalid.empty()),
      observed(o.observer, masters.empty() ? nullptr : masters[0]->opts().observer, c.key, kind),
      commands(std::move(c)),
      options(o),
      hold(executor, hold_drift()),
      cleanups(masters.size()),
      invalid_reason(std::move(invalid)),
      retry_pause(executor),
      random_(jitter_seed()) {
  hold.observe(&observed);
  if (o.stall) hold.watch_stalls(o.stall);
  else if (!masters.empty()) hold.watch_stalls(masters[0]->opts().stall);
  names.reserve(masters.size());
  for (const auto& master : masters) names.push_back(master->opts().host + ':' + std::to_string(master->opts().port));
}

std::shared_ptr<lock_engine> lock_engine::make(asio::any_io_executor executor,
                                               std::vector<std::shared_ptr<connection_impl>> masters,
                                               hold_commands commands, redlock_options options, lock_kind kind,
                                               std::string invalid_reason) {
  auto engine = std::make_shared<lock_engine>(std::move(executor), std::move(masters), std::move(commands), options,
                                              kind, std::move(invalid_reason));
  for (const auto& master : engine->masters) master->watch_master(std::weak_ptr<master_watcher>(engine));
  engine->hold.attach(engine);
  engine->hold.on_lost([weak = std::weak_ptr(engine)](error_code why) {
    if (auto self = weak.lock()) self->on_lost(why);
  });
  return engine;
}

// A lost hold's keys are deleted in the background.
void lock_engine::on_lost(error_code why) {
  if (dlock::detail::log_enabled(log_level::warning))
    dlock::detail::log(log_level::warning,
                       "lock " + commands.key + ": lost (" + why.message() + "); " + last_outcomes());
  release_in_background(hold.token());
}

bool lock_engine::every_master_closed() const noexcept {
  for (const auto& master : masters)
    if (master->state() != connection_state::closed) return false;
  return !masters.empty();
}

lock_status lock_engine::status() const noexcept {
  return {hold.state(), acquiring, releasing, released, every_master_closed(), commands.one_server(), unusable};
}

namespace {

// One step of the hold's auto-extension: an extend round.
asio::awaitable<error_code> auto_extend_step(std::weak_ptr<lock_engine> weak) {
  auto self = weak.lock();
  if (!self) co_return make_error_code(dlock::error::not_held);
  auto extend = [](auto handler, std::shared_ptr<lock_engine> owner) {
    auto ttl = owner->options.ttl;
    start_extend(std::move(owner), ttl, asio::any_completion_handler<void(error_code)>(std::move(handler)));
  };
  auto token = asio::as_tuple(asio::use_awaitable);
  auto [ec] = co_await asio::async_initiate<decltype(token), void(error_code)>(extend, token, std::move(self));
  co_return ec;
}

}  // namespace

void lock_engine::begin_hold(std::string_view token, redlock_clock::time_point start, std::int64_t fencing_token) {
  hold.begin(token, start, options.ttl, fencing_token);
  highest_fencing_token = std::max(highest_fencing_token, fencing_token);
  granted.hold_began();
  check_failover();  // a master replaced while the attempt was out
  if (!options.auto_extend || !hold.held()) return;
  auto_extend_settings settings{options.ttl, options.extend_fraction, options.max_hold};
  std::weak_ptr<lock_engine> weak = weak_from_this();
  hold.extend_automatically(settings, [weak] { return auto_extend_step(weak); });
}

// ---- failover ----

grant_record::epochs lock_engine::master_epochs() const {
  grant_record::epochs now;
  for (const auto& master : masters) now.push_back(master->master_epoch());
  return now;
}

// In place when the connection runs on this lock's thread: the hold is lost
// before the connection moves on to the new master.
void lock_engine::on_master_changed(std::uint64_t) {
  asio::dispatch(executor, [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->check_failover();
  });
}

void lock_engine::check_failover() {
  if (hold.held() && granted.lost_to_failover(master_epochs())) hold.lose(dlock::error::failed_over);
}

// Every counter raised to the highest token given (a failover set them back).
void lock_engine::raise_counters(std::int64_t token) {
  dlock::detail::log(log_level::warning, "lock " + commands.key + ": fencing token " + std::to_string(token) +
                                             " is not above " + std::to_string(highest_fencing_token) +
                                             " (a failover?): raising the counter, trying again");
  boost::container::small_vector<std::size_t, 7> every;
  for (std::size_t i = 0; i < masters.size(); ++i) every.push_back(i);
  write_back(highest_fencing_token, 0, every, nullptr);
}

void lock_engine::note_unsettled(std::size_t master, std::string attempt_token, error_code why) {
  if (!cleanups.note(master, std::move(attempt_token), why, redlock_clock::now(), options.ttl)) return;
  std::weak_ptr<lock_engine> weak = weak_from_this();
  auto on_reconnected = [weak, master](error_code ec) {
    auto self = weak.lock();  // a lock destroyed meanwhile sends nothing
    if (!self) return;
    self->cleanups.reconnected(master);
    if (!ec) self->resend_unsettled_cleanups(master);
  };
  // On our executor: the master's connection may run on another.
  connection_access::wait_for(masters[master], connection_state::connected,
                              asio::bind_executor(executor, on_reconnected));
}

void lock_engine::resend_unsettled_cleanups(std::optional<std::size_t> only) {
  if (cleanups.empty()) return;  // the common case, before every attempt
  auto now = redlock_clock::now();
  for (std::size_t master = 0; master < masters.size(); ++master)
    if (!only || master == *only)
      for (auto& token : cleanups.take(master, now)) release_in_background(token, master);
}

void start_settle(std::shared_ptr<lock_engine> owner, asio::any_completion_handler<void(error_code)> handler) {
  using dlock::detail::completion;
  auto waiter = std::make_shared<dlock::detail::op_base<void(error_code)>>(std::move(handler));
  // A cancelled wait ends at once; the deletes go on.
  auto on_cancel = [weak_owner = std::weak_ptr(owner), weak = std::weak_ptr(waiter)](asio::cancellation_type) {
    auto self = weak_owner.lock();
    auto w = weak.lock();
    if (!self || !w) return;
    self->cleanups.forget(w.get());
    w->complete(completion::post, self->executor, asio::error::operation_aborted);
  };
  waiter->hook_cancellation(owner->executor, on_cancel);
  auto& executor = owner->executor;
  asio::post(executor, [owner = std::move(owner), waiter = std::move(waiter)] {
    if (waiter->done()) return;  // cancelled on the way
    auto settled = [executor = owner->executor, waiter] { waiter->complete(completion::post, executor, error_code()); };
    if (!owner->cleanups.in_flight()) return settled();
    owner->cleanups.after_settled(waiter.get(), std::move(settled));
  });
}

double lock_engine::random_unit() {
  return std::uniform_real_distribution<double>(0.0, 1.0)(random_);
}

// ---------------------------------------------------------------- round_fanout

round_fanout::round_fanout(std::shared_ptr<lock_engine> owner, round_kind kind, milliseconds ttl,
                           redlock_clock::time_point start)
    : lock_fanout(std::move(owner)),
      // The observer hears of Redlock rounds only.
      report_(owner_->observed && !owner_->commands.one_server(), owner_->names, kind),
      round_id_(++owner_->rounds),
      attempt_(owner_->commands, kind, owner_->masters.size(), ttl, owner_->hold_drift(), start) {}

void round_fanout::note_decision() { owner_->granted.decided(round_id_, attempt_.round()); }

void round_fanout::on_answer(std::size_t index, error_code ec, const reply& answer) {
  auto now = redlock_clock::now();
  auto reaction = attempt_.on_answer(index, ec, answer, now, deadline_passed());
  if (reaction.resend) return send(index);
  report_.answered(index, reaction.outcome, ec, attempt_.round().start(), now);
  if (reaction.decided) return decided();
  owner_->granted.answered_late(round_id_, index, reaction.outcome);
  if (reaction.raise_counter) owner_->write_back(attempt_.round().fencing_token(), 0, {&index, 1}, nullptr);
  if (reaction.release) owner_->release_in_background(round_token(), index);
}

void round_fanout::on_deadline() {
  auto now = redlock_clock::now();
  bool decided_now = attempt_.on_deadline(now);
  report_.time_out_pending(attempt_.round().start(), now);
  if (decided_now) decided();
}

void round_fanout::report_decision() {
  report_.decided(attempt_.round().failure(), attempt_.round().start(), redlock_clock::now());
}

void round_fanout::on_all_answered() {
  if (auto told = report_.settled(owner_->observed.id())) owner_->observed.to()->on_redlock_round(*told);
}

// -------------------------------------------------------------- release_fanout

namespace {

/// Compare-and-delete on some or all masters. A user's release() (with a
/// handler) completes as soon as the outcome is known: a majority released
/// (the lock is free), or too many masters said no or failed for that; the
/// remaining answers are still awaited (up to the per-master timeout) but
/// nobody waits for them. A background one (no handler) counts in
/// the engine's cleanups in flight until every master answered.
class release_fanout final : public lock_fanout {
 public:
  using done_handler = asio::any_completion_handler<void(error_code)>;
  // The handler is taken here: any_completion_handler's assignment is broken in Asio 1.81.
  release_fanout(std::shared_ptr<lock_engine> owner, std::string_view token, done_handler done = {},
                 bool in_place = false)
      : lock_fanout(std::move(owner)), in_place_(in_place), done_(std::move(done)) {
    if (!done_.has_handler()) token_ = token;
    owner_->commands.release(command(), token);
  }

  void start(std::optional<std::size_t> master) {  // every master, or one
    cleanup_ = !done_.has_handler();
    if (cleanup_) owner_->cleanups.sent();
    auto masters = owner_->masters.size();
    tally_.emplace(masters, master ? 1 : masters, owner_->commands.one_server());
    if (master) send(*master);
    else send_to_all();
    arm_deadline();
  }

 private:
  void on_answer(std::size_t index, error_code ec, const reply& answer) override {
    if (tally_->resend(ec, deadline_passed())) return send(index);
    if (ec && cleanup_) owner_->note_unsettled(index, token_, ec);
    if (auto outcome = tally_->record(ec, answer)) complete(*outcome);
  }

  void on_all_answered() override {
    complete(tally_->all_answered());  // with a handler, reached only when a subset was asked
    if (!std::exchange(cleanup_, false)) return;
    for (auto& waiter : owner_->cleanups.settled()) waiter.then();
  }

  // The user's release() ends here (a background one has no handler).
  void complete(error_code ec) {
    if (!done_.has_handler() || done_.done()) return;
    owner_->releasing = false;
    owner_->released_masters = tally_->released();
    done_.complete(in_place_ ? dlock::detail::completion::in_place : dlock::detail::completion::dispatch,
                   owner_->executor, ec);
  }

  std::optional<release_tally> tally_;  // set by start()
  bool in_place_;
  bool cleanup_ = false;  // a background release counted in flight, until settled
  dlock::detail::op_base<void(error_code)> done_;  // none: a background release
  std::string token_;  // a background release's only: noted if a master fails it
};

/// Step 4's write-back, decided by a write_back_tally (algorithm/quorum.hpp).
class fencing_write_back final : public lock_fanout {
 public:
  using report_function = std::function<void(error_code)>;
  fencing_write_back(std::shared_ptr<lock_engine> owner, std::int64_t token, std::size_t needed,
                     std::size_t asked, report_function report)
      : lock_fanout(std::move(owner)), tally_(token, needed, asked), report_(std::move(report)) {
    command().set(fencing_write_back_script(), {owner_->commands.counter_key}, {decimal(token)});
  }

  void start(std::span<const std::size_t> targets) {
    for (auto master : targets) send(master);
    if (auto refused = tally_.at_start()) return finish(*refused);
    arm_deadline();
  }

 private:
  void on_answer(std::size_t, error_code ec, const reply& answer) override {
    if (auto outcome = tally_.record(ec, answer)) finish(*outcome);
  }
  void on_deadline() override { finish(write_back_tally::at_deadline()); }
  void finish(error_code ec) {
    if (auto report = std::exchange(report_, nullptr)) report(ec);
  }

  write_back_tally tally_;
  report_function report_;
};

}  // namespace

void lock_engine::release_in_background(std::string_view token, std::optional<std::size_t> master) {
  make_fanout<release_fanout>(shared_from_this(), token)->start(master);
}

void send_release(std::shared_ptr<lock_engine> owner, std::string_view token,
                  asio::any_completion_handler<void(error_code)> done, bool in_place) {
  make_fanout<release_fanout>(std::move(owner), token, std::move(done), in_place)->start(std::nullopt);
}

void lock_engine::write_back(std::int64_t token, std::size_t needed, std::span<const std::size_t> targets,
                             std::function<void(error_code)> report) {
  auto raise = make_fanout<fencing_write_back>(shared_from_this(), token, needed, targets.size(), std::move(report));
  raise->start(targets);
}

}  // namespace dlock::redis::detail
