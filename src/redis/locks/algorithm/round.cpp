#include "redis/locks/algorithm/round.hpp"

#include <dlock/error.hpp>
#include <dlock/limits.hpp>

#include <algorithm>
#include <utility>

namespace dlock::redis::detail {

using std::chrono::milliseconds;

const char* to_string(master_outcome outcome) noexcept {
  switch (outcome) {
    case master_outcome::pending: return "pending";
    case master_outcome::ok: return "ok";
    case master_outcome::already_ours: return "already_ours";
    case master_outcome::taken: return "taken";
    case master_outcome::failed: return "failed";
    case master_outcome::timed_out: return "timed_out";
  }
  return "?";
}

std::string describe(std::span<const std::string> masters, std::span<const master_outcome> outcomes) {
  std::string text;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    if (i) text += ' ';
    text += masters[i];
    text += '=';
    text += to_string(outcomes[i]);
  }
  return text;
}

redlock_round::redlock_round(std::size_t masters, milliseconds ttl, drift_rule drift,
                             redlock_clock::time_point start, bool fencing)
    : fencing_(fencing),
      start_(start),
      valid_until_(detail::valid_until(start, ttl, drift)),
      slots_(masters),
      ttl_(ttl),
      drift_(drift) {
  tally_[static_cast<std::size_t>(master_outcome::pending)] = static_cast<std::uint32_t>(masters);
}

milliseconds redlock_round::drift() const noexcept {
  return std::chrono::ceil<milliseconds>(detail::drift(ttl_, drift_));
}

std::size_t redlock_round::count(master_outcome outcome) const noexcept {
  return tally_[static_cast<std::size_t>(outcome)];
}

void redlock_round::set(master_outcome& slot, master_outcome outcome) noexcept {
  --tally_[static_cast<std::size_t>(slot)];
  ++tally_[static_cast<std::size_t>(outcome)];
  slot = outcome;
}

std::size_t redlock_round::ours() const noexcept {
  return count(master_outcome::ok) + count(master_outcome::already_ours);
}

milliseconds redlock_round::validity(redlock_clock::time_point now) const noexcept {
  return validity_left(valid_until_, now);
}

round_state redlock_round::record(std::size_t index, master_outcome outcome,
                                  redlock_clock::time_point now, std::int64_t counter) {
  if (index >= slots_.size() || outcome == master_outcome::pending) return state_;
  // A master answers once; a reply after its timeout was recorded is still
  // worth knowing when it says the key is ours (it must be released).
  auto& slot = slots_[index].outcome;
  bool was_timed_out = slot == master_outcome::timed_out;
  if (slot != master_outcome::pending && !was_timed_out) return state_;
  if (was_timed_out && outcome != master_outcome::ok && outcome != master_outcome::already_ours)
    return state_;
  set(slot, outcome);
  if (fencing_) slots_[index].counter = counter < 0 ? no_counter : counter;
  if (decided()) {
    slots_[index].late = true;
    return state_;
  }
  decide(now);
  return state_;
}

round_state redlock_round::time_out_pending(redlock_clock::time_point now) {
  for (auto& slot : slots_)
    if (slot.outcome == master_outcome::pending) set(slot.outcome, master_outcome::timed_out);
  if (!decided()) decide(now);
  return state_;
}

void redlock_round::decide(redlock_clock::time_point now) {
  auto fail = [&](dlock::error why) {
    state_ = round_state::failed;
    failure_ = make_error_code(why);
    validity_at_decision_ = validity(now);
  };
  auto left = validity(now);
  if (ours() >= quorum() && fencing_ && !fencing_settled()) {
    // A majority said yes, but its counters do not fence yet: wait for the others.
    if (!fencing_reachable()) fail(dlock::error::no_quorum);
    else if (left <= milliseconds::zero()) fail(dlock::error::expired);
    return;
  }
  if (ours() >= quorum()) {
    if (left > milliseconds::zero()) {
      state_ = round_state::acquired;
      validity_at_decision_ = left;
      if (fencing_) fencing_token_ = token_from_counters();
    } else {
      fail(dlock::error::expired);
    }
    return;
  }
  std::size_t taken = count(master_outcome::taken);
  std::size_t broken = count(master_outcome::failed) + count(master_outcome::timed_out);
  if (ours() + count(master_outcome::pending) < quorum())
    fail(taken >= broken ? dlock::error::taken : dlock::error::no_quorum);
  else if (left <= milliseconds::zero())
    fail(dlock::error::expired);
}

bool redlock_round::counted(std::size_t index) const noexcept {
  auto outcome = slots_[index].outcome;
  return outcome == master_outcome::ok || outcome == master_outcome::already_ours || outcome == master_outcome::taken;
}

// Masters that answered (yes or no), and those of them with a counter.
redlock_round::counter_tally redlock_round::tally_counters() const noexcept {
  counter_tally t;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (!counted(i)) continue;
    ++t.answered;
    if (slots_[i].counter != no_counter) ++t.with_counter;
  }
  return t;
}

// Counters seen cover a majority K, which meets the majority W that holds
// the last token; or every master answered, so that no counter is unseen
// (with none at all, a new key). A master that failed or timed out is
// unknown, not empty: it may hold the last token, written back to a bare
// majority that is now partly out of reach.
bool redlock_round::fencing_settled() const noexcept {
  auto t = tally_counters();
  return t.with_counter >= quorum() || t.answered == masters();
}

// Either of the above can still happen once the pending masters answer.
bool redlock_round::fencing_reachable() const noexcept {
  auto t = tally_counters();
  std::size_t pending = count(master_outcome::pending);
  return t.with_counter + pending >= quorum() || t.answered + pending == masters();
}

// The largest counter seen, after its increment: a master that said no was
// not incremented, so its counter counts plus one.
std::int64_t redlock_round::token_from_counters() const noexcept {
  std::int64_t token = 1;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto [outcome, late, counter] = slots_[i];
    if (!counted(i) || counter == no_counter) continue;
    auto next = outcome == master_outcome::taken ? counter + 1 : counter;
    token = std::max(token, next);
  }
  return token;
}

std::size_t redlock_round::at_token() const noexcept {
  std::size_t n = 0;
  for (std::size_t i = 0; fencing_ && i < slots_.size(); ++i)
    if (counted(i) && slots_[i].counter >= fencing_token_) ++n;
  return n;
}

bool redlock_round::behind(std::size_t index) const noexcept {
  return fencing_ && index < slots_.size() && counted(index) && slots_[index].counter < fencing_token_;
}

bool redlock_round::needs_late_release(std::size_t index) const noexcept {
  if (index >= slots_.size() || state_ != round_state::failed || !slots_[index].late) return false;
  return slots_[index].outcome == master_outcome::ok || slots_[index].outcome == master_outcome::already_ours;
}

std::string redlock_round::describe() const {
  std::string text;
  for (const auto& slot : slots_) {
    if (!text.empty()) text += ' ';
    text += to_string(slot.outcome);
  }
  return text;
}

// ---------------------------------------------------------------- round_report

namespace {

master_answer answer_of(master_outcome outcome) noexcept {
  switch (outcome) {
    case master_outcome::ok:
    case master_outcome::already_ours: return master_answer::yes;
    case master_outcome::taken: return master_answer::taken;
    case master_outcome::timed_out: return master_answer::timed_out;
    case master_outcome::pending:
    case master_outcome::failed: break;
  }
  return master_answer::failed;
}

}  // namespace

round_report::round_report(bool observed, const std::vector<std::string>& masters, round_kind kind) {
  if (!observed) return;
  votes_ = std::make_unique<votes>();
  votes_->kind = kind;
  for (const auto& name : masters) votes_->of_master.push_back({name, master_answer::timed_out, {}, {}});
  votes_->answered.assign(masters.size(), false);
}

void round_report::answered(std::size_t index, master_outcome outcome, error_code ec,
                            redlock_clock::time_point start, redlock_clock::time_point now) {
  if (!votes_ || std::exchange(votes_->answered[index], true)) return;
  auto& vote = votes_->of_master[index];
  vote.answer = answer_of(outcome);
  vote.error = ec;
  vote.latency = now - start;
}

void round_report::time_out_pending(redlock_clock::time_point start, redlock_clock::time_point now) {
  if (!votes_) return;
  for (std::size_t i = 0; i < votes_->of_master.size(); ++i) {
    if (std::exchange(votes_->answered[i], true)) continue;
    auto& vote = votes_->of_master[i];
    vote = {vote.master, master_answer::timed_out, make_error_code(dlock::error::timed_out), now - start};
  }
}

void round_report::decided(error_code decision, redlock_clock::time_point start, redlock_clock::time_point now) {
  if (!votes_) return;
  votes_->decision = decision;
  votes_->decided_after = now - start;
}

std::optional<dlock::redlock_round> round_report::settled(const lock_id& lock) {
  if (!votes_ || std::exchange(votes_->told, true)) return std::nullopt;
  return dlock::redlock_round{lock, votes_->kind, votes_->decision, votes_->decided_after, votes_->of_master};
}

}  // namespace dlock::redis::detail
