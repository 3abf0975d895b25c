#include "redis/connection/sentinel_watch.hpp"

#include "redis/connection/connection_impl.hpp"

#include <dlock/log.hpp>

namespace dlock::redis::detail {

sentinel_watch::sentinel_watch(asio::any_io_executor executor, const options& master,
                               std::weak_ptr<connection_impl> owner)
    : executor_(std::move(executor)),
      sentinels_(master.sentinel),
      timeout_(master.connect_timeout),
      rewatch_delay_(master.reconnect_max),
      owner_(std::move(owner)),
      ping_timer_(executor_),
      rewatch_timer_(executor_) {}

void sentinel_watch::discover(std::uint64_t attempt) {
  attempt_ = attempt;
  start_round(purpose::attempt);
}

void sentinel_watch::close() {
  closed_ = true;
  drop_link();
  rewatch_timer_.cancel();
}

// What the link still owes (its answers, its close) comes back with an old
// generation, and is ignored.
void sentinel_watch::drop_link() {
  ++generation_;
  if (link_) link_->close();
  link_.reset();
  ping_timer_.cancel();
  stop_listening();
}

// ---- a round: each sentinel asked once, from the one that answered last ----

void sentinel_watch::start_round(purpose why) {
  purpose_ = why;
  rewatch_timer_.cancel();
  round_.emplace(sentinels_.sentinels.size(), first_);
  ask_next();
}

// A connection of its own to each sentinel asked: the one that names the
// master stays, subscribed; the one before is closed.
void sentinel_watch::ask_next() {
  drop_link();
  auto next = round_->next();
  if (!next) return round_failed(round_->failure());
  linked_ = *next;
  link_ = std::make_shared<connection_impl>(executor_, link_options(linked_));
  auto generation = generation_;
  std::weak_ptr<sentinel_watch> weak = shared_from_this();
  link_->set_push_listener([weak](const reply& message) {
    if (auto self = weak.lock()) self->on_message(message);
  });
  link_->connect([weak, generation](error_code ec) {
    if (auto self = weak.lock()) self->on_linked(generation, ec);
  });
}

// The query and the subscription leave in one write: the sentinel runs them
// back to back, so no switch can fall between the answer and the subscription.
void sentinel_watch::on_linked(std::uint64_t generation, error_code ec) {
  if (generation != generation_ || closed_) return;
  if (ec) return ask_next();
  send(master_query(sentinels_.master_name), query);
  send(switch_subscription(), subscribe);
  std::weak_ptr<sentinel_watch> weak = shared_from_this();
  link_->wait_for(connection_state::closed, [weak, generation](error_code) {
    if (auto self = weak.lock()) self->on_link_closed(generation);
  });
}

void sentinel_watch::send(command c, command_index what) {
  auto r = link_->make_request();
  r->wire = std::move(c).take_encoded();
  r->answer_to(std::shared_ptr<reply_sink>(shared_from_this()), generation_ * commands + what, true);
  link_->enqueue(std::move(r));
}

void sentinel_watch::on_reply(std::size_t index, error_code ec, const reply& answer) {
  if (index / commands != generation_ || closed_) return;  // an older link's
  on_answer(static_cast<command_index>(index % commands), ec, answer);
}

void sentinel_watch::on_answer(command_index what, error_code ec, const reply& answer) {
  switch (what) {
    case query:
      if (ec) return ask_next();
      if (auto master = master_address(answer)) return found(*master);
      round_->answered_unknown();
      return ask_next();
    case subscribe:
      if (ec) return link_->close();  // on_link_closed starts over
      arm_ping();
      return listen_to_the_others();
    case ping:
    case commands: return;  // a silent sentinel is the link's to notice (it closes)
  }
}

void sentinel_watch::found(const server_address& master) {
  first_ = linked_;
  round_.reset();
  auto owner = owner_.lock();
  if (!owner) return;
  if (purpose_ == purpose::attempt) return owner->sentinel_discovered(attempt_, {}, master);
  // A switch may have passed while no sentinel was watched.
  const auto& current = owner->current_master();
  if (master.host != current.host || master.port != current.port) owner->sentinel_switched(master);
}

void sentinel_watch::round_failed(error e) {
  round_.reset();
  dlock::detail::log(dlock::log_level::warning, "dlock.redis: no sentinel named the master: " +
                                                    make_error_code(e).message());
  if (purpose_ == purpose::watch) return arm_rewatch();
  if (auto owner = owner_.lock()) owner->sentinel_discovered(attempt_, e, {});
}

void sentinel_watch::on_message(const reply& message) {
  auto master = switched_master(message, sentinels_.master_name);
  if (!master || closed_) return;
  if (auto owner = owner_.lock()) owner->sentinel_switched(*master);
}

// ---- keeping a sentinel watched ----

// The others' answers are not awaited and their losses not repaired: the
// linked sentinel is the one relied on (pinged, replaced); these only bring
// the news sooner. The next round opens them again.
void sentinel_watch::listen_to_the_others() {
  stop_listening();
  std::weak_ptr<sentinel_watch> weak = shared_from_this();
  for (std::size_t i = 0; i < sentinels_.sentinels.size(); ++i) {
    if (i == linked_) continue;
    auto listener = std::make_shared<connection_impl>(executor_, link_options(i));
    listener->set_push_listener([weak](const reply& message) {
      if (auto self = weak.lock()) self->on_message(message);
    });
    listener->connect([weak, listener = std::weak_ptr(listener)](error_code ec) {
      auto self = weak.lock();
      auto l = listener.lock();
      if (ec || !self || !l || self->closed_) return;
      auto r = l->make_request();
      r->wire = switch_subscription().take_encoded();
      r->answer_to(std::shared_ptr<reply_sink>(self), 0, true);  // generation 0: its answer is ignored
      l->enqueue(std::move(r));
    });
    listeners_.push_back(std::move(listener));
  }
}

void sentinel_watch::stop_listening() {
  for (auto& listener : listeners_) listener->close();
  listeners_.clear();
}

// The subscription's sentinel went away: another one is asked, and a switch
// missed meanwhile is found by comparing addresses.
void sentinel_watch::on_link_closed(std::uint64_t generation) {
  if (generation != generation_ || closed_ || round_) return;
  drop_link();
  start_round(purpose::watch);
}

// A subscription sends nothing while nothing happens: a ping now and then
// makes a silent sentinel time out (the link closes) rather than watch nothing.
void sentinel_watch::arm_ping() {
  ping_timer_.expires_after(timeout_);
  std::weak_ptr<sentinel_watch> weak = shared_from_this();
  ping_timer_.async_wait([weak, generation = generation_](error_code ec) {
    auto self = weak.lock();
    if (ec || !self || generation != self->generation_ || self->closed_) return;
    self->send(command{"PING"}, ping);
    self->arm_ping();
  });
}

void sentinel_watch::arm_rewatch() {
  rewatch_timer_.expires_after(rewatch_delay_);
  std::weak_ptr<sentinel_watch> weak = shared_from_this();
  rewatch_timer_.async_wait([weak](error_code ec) {
    auto self = weak.lock();
    if (!ec && self && !self->closed_ && !self->round_) self->start_round(purpose::watch);
  });
}

options sentinel_watch::link_options(std::size_t sentinel) const {
  options o;
  o.host = sentinels_.sentinels[sentinel].host;
  o.port = sentinels_.sentinels[sentinel].port;
  o.username = sentinels_.username;
  o.password = sentinels_.password;
  o.tls = sentinels_.tls;
  o.connect_timeout = timeout_;
  o.command_timeout = timeout_;
  o.reconnect = false;
  return o;
}

}  // namespace dlock::redis::detail
