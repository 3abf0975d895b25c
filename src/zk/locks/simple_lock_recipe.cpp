// The simple lock's acquire state machine (see simple_lock_recipe.hpp).
#include "simple_lock_recipe.hpp"

#include <dlock/error.hpp>
#include <dlock/zk/error.hpp>


namespace dlock::zk::detail {

using action = acquire_action;

simple_acquire_machine::simple_acquire_machine(settings s)
    : settings_(std::move(s)), retries_(settings_.retry) {
  parent_ = settings_.lock_path.substr(0, settings_.lock_path.rfind('/'));
}

action simple_acquire_machine::go(state s, action a) {
  state_ = s;
  return a;
}

action simple_acquire_machine::finish(error_code ec) {
  result_ = ec;
  return go(state::finished, action::done);
}

action simple_acquire_machine::start() { return create(); }

action simple_acquire_machine::create() {
  if (cancelled_) return finish(cancel_reason_);
  return go(state::creating, action::create);
}

// Who holds it? Arms a watch on the node in the same request.
action simple_acquire_machine::check() { return go(state::checking, action::watch_owner); }

action simple_acquire_machine::on_created(reply r, std::string_view, std::int64_t czxid, reply,
                                          std::span<const std::string>) {
  switch (r.result) {
    case step_result::ok:
      own_path_ = settings_.lock_path;
      czxid_ = czxid;
      if (cancelled_) return remove_ours(czxid, cancel_reason_);
      return finish({});
    case step_result::node_exists:
      // Someone else's: a create of ours in doubt is settled by check(), never by creating again.
      if (cancelled_) return finish(cancel_reason_);
      return check();
    case step_result::no_node:
      return ensure_parent();
    case step_result::connection_loss:
      create_unknown_ = true;  // our node may exist: check() finds it by its owner
      return backoff(r.ec);
    default:
      return finish(r.ec);
  }
}

action simple_acquire_machine::on_owner(reply r, std::int64_t ephemeral_owner, std::int64_t czxid,
                                        std::int64_t session_id) {
  if (hunting_) return hunted(r, ephemeral_owner, czxid, session_id);
  switch (r.result) {
    case step_result::connection_loss:
      return backoff(r.ec);
    case step_result::no_node:  // free (or our lost create never happened): create
      create_unknown_ = false;
      return create();
    case step_result::ok:
      break;
    default:
      return finish(r.ec);
  }
  if (create_unknown_ && ephemeral_owner == session_id) {
    create_unknown_ = false;  // our lost create did happen
    own_path_ = settings_.lock_path;
    czxid_ = czxid;
    if (cancelled_) return remove_ours(czxid, cancel_reason_);
    return finish({});
  }
  create_unknown_ = false;
  if (cancelled_) return finish(cancel_reason_);
  if (!settings_.wait) return finish(make_error_code(dlock::error::taken));
  return go(state::waiting, action::wait);
}

action simple_acquire_machine::on_watch_fired(reply r) {
  switch (r.result) {
    case step_result::ok:  // the holder's node went: race for it
      return create();
    case step_result::aborted:
      return finish(cancelled_ ? cancel_reason_ : r.ec);
    case step_result::connection_loss:  // the watch may be gone with the connection: look again
      return check();
    default:
      return finish(r.ec);
  }
}

action simple_acquire_machine::ensure_parent() {
  if (cancelled_) return finish(cancel_reason_);
  if (!retries_.retry_missing_parent()) return finish(make_error_code(zk::error::no_node));
  return go(state::ensuring, action::ensure_path);
}

action simple_acquire_machine::on_ensured(reply r) {
  switch (r.result) {
    case step_result::ok:
    case step_result::node_exists:
    case step_result::no_node:          // a parent container reaped meanwhile: the create says
    case step_result::connection_loss:  // the create says whether the connection is back
      return create();
    default:
      return finish(r.ec);
  }
}

action simple_acquire_machine::backoff(error_code ec) {
  if (!retries_.count_failure() && !hunting_) {
    if (!create_unknown_) return finish(ec);
    // Our create may have been applied, and the node would block the lock
    // (us included) while the session lives: fail now (the shell completes
    // the caller on hunting()), and look for it until found and deleted,
    // absent, or the session ends.
    hunting_ = true;
    result_ = ec;
  }
  delay_ = retries_.delay();
  return go(state::backing_off, action::backoff);
}

action simple_acquire_machine::on_backoff_done() {
  if (state_ != state::backing_off) return action::done;
  // Cancelled with no create of ours in doubt: nothing of ours can exist.
  if (cancelled_ && !create_unknown_) return finish(cancel_reason_);
  return check();
}

action simple_acquire_machine::hunted(reply r, std::int64_t ephemeral_owner, std::int64_t czxid,
                                      std::int64_t session_id) {
  if (r.result == step_result::connection_loss) return backoff(r.ec);
  if (r.result == step_result::ok && ephemeral_owner == session_id) return remove_ours(czxid, result_);
  return finish(result_);  // not there, another's, or the session is over
}

// Our node (cancelled after the create succeeded, or found by the hunt):
// deleted if still ours, then `report`.
action simple_acquire_machine::remove_ours(std::int64_t czxid, error_code report) {
  own_path_ = settings_.lock_path;
  czxid_ = czxid;
  result_ = report;
  return go(state::removing, action::remove_owned);
}

action simple_acquire_machine::on_removed(reply) {
  // The removal keeps trying in the background while the session lives.
  own_path_.clear();
  return go(state::finished, action::done);
}

action simple_acquire_machine::on_listed(reply, std::span<const std::string>) {
  return finish(make_error_code(dlock::error::invalid_argument));
}

action simple_acquire_machine::on_watch_set(reply) { return finish(make_error_code(dlock::error::invalid_argument)); }

bool simple_acquire_machine::cancel(error_code reason) {
  if (state_ == state::finished || cancelled_) return false;
  cancelled_ = true;
  cancel_reason_ = reason;
  return state_ == state::waiting || state_ == state::backing_off;
}

}  // namespace dlock::zk::detail
