#include "redis/locks/round_report.hpp"

#include "redis/locks/engine.hpp"

namespace dlock::redis::detail {

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

round_report::round_report(const lock_engine& owner, round_kind kind) {
  if (!owner.observed || owner.commands.one_server()) return;  // the observer's redlock rounds only
  votes_ = std::make_unique<votes>();
  votes_->kind = kind;
  for (const auto& name : owner.names) votes_->of_master.push_back({name, master_answer::timed_out, {}, {}});
  votes_->answered.assign(owner.names.size(), false);
}

void round_report::answered(std::size_t index, master_outcome outcome, error_code ec,
                            redlock_clock::time_point start) {
  if (!votes_ || std::exchange(votes_->answered[index], true)) return;
  auto& vote = votes_->of_master[index];
  vote.answer = answer_of(outcome);
  vote.error = ec;
  vote.latency = redlock_clock::now() - start;
}

void round_report::time_out_pending(redlock_clock::time_point start) {
  if (!votes_) return;
  auto late = redlock_clock::now() - start;
  for (std::size_t i = 0; i < votes_->of_master.size(); ++i) {
    if (std::exchange(votes_->answered[i], true)) continue;
    auto& vote = votes_->of_master[i];
    vote = {vote.master, master_answer::timed_out, make_error_code(dlock::error::timed_out), late};
  }
}

void round_report::decided(error_code decision, redlock_clock::time_point start) {
  if (!votes_) return;
  votes_->decision = decision;
  votes_->decided_after = redlock_clock::now() - start;
}

void round_report::settled(const lock_engine& owner) {
  if (!votes_ || std::exchange(votes_->told, true)) return;
  owner.observed.to()->on_redlock_round(
      {owner.observed.id(), votes_->kind, votes_->decision, votes_->decided_after, votes_->of_master});
}

}  // namespace dlock::redis::detail
