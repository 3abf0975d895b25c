// The sequential lock recipe (mutex, shared mutex, election): the decision
// after a listing and the acquire state machine.
#include "lock_recipe.hpp"

#include <dlock/error.hpp>
#include <dlock/log.hpp>

#include <algorithm>

namespace dlock::zk::detail {

decision decide(lock_role role, std::string_view own_name, std::span<const std::string> children) {
  auto nodes = sort_contenders(children);
  auto own = std::find_if(nodes.begin(), nodes.end(), [&](const lock_node& n) { return n.name == own_name; });
  if (own == nodes.end()) return {decision::gone, {}};
  if (role != lock_role::reader) {
    if (own == nodes.begin()) return {decision::holder, {}};
    return {decision::wait, std::prev(own)->name};
  }
  // A reader waits only for writers (and exclusive or unknown nodes) ahead of it.
  for (auto it = own; it != nodes.begin();) {
    --it;
    if (it->kind != lock_kind::read) return {decision::wait, it->name};
  }
  return {decision::holder, {}};
}

// --- acquire_machine ---

using action = acquire_machine::action;

acquire_machine::acquire_machine(settings s, std::string guid)
    : settings_(std::move(s)), guid_(std::move(guid)), retries_(settings_.retry) {
  create_path_ = join_path(settings_.lock_path, node_prefix(settings_.role, guid_));
}

action acquire_machine::go(state s, action a) {
  state_ = s;
  return a;
}

action acquire_machine::start() {
  if (cancelled_) return finish(cancel_reason_);
  return create();
}

action acquire_machine::create() {
  if (cancelled_) return finish(cancel_reason_);
  return go(state::creating, action::create_and_list);
}

action acquire_machine::finish(error_code ec) {
  result_ = ec;
  return go(state::finished, action::done);
}

action acquire_machine::cleanup(error_code ec) {
  if (own_path_.empty()) return finish(ec);
  result_ = ec;  // reported once the node is gone
  target_path_ = own_path_;
  return go(state::cleaning, action::remove);
}

action acquire_machine::fail(reply r) { return cleanup(r.ec); }

action acquire_machine::retry(state then, error_code ec) {
  if (hunting_) return hunt(ec);
  if (retries_.after_failure(then)) return go(state::backing_off, action::backoff);
  return create_unknown_ ? hunt(ec) : cleanup(ec);
}

// Retries ran out while a create's outcome was unknown: our node may exist
// and would block the lock (us included) for as long as the session lives.
// The acquire fails with `ec` now; the search for the node by its GUID goes
// on, unbounded but paced, until it is found and deleted, proven absent, or
// the session ends (taking the node with it).
action acquire_machine::hunt(error_code ec) {
  if (!hunting_) {
    hunting_ = true;
    result_ = ec;
    if (dlock::detail::log_enabled(log_level::info))
      dlock::detail::log(log_level::info, "zk lock: looking for a node with GUID " + guid_ + " under " +
                                              settings_.lock_path + " in the background");
  }
  retries_.at_slowest(state::recovering);
  return go(state::backing_off, action::backoff);
}

action acquire_machine::resume(state s) {
  switch (s) {
    case state::ensuring:
      if (cancelled_) return finish(cancel_reason_);
      return go(state::ensuring, action::ensure_path);
    case state::creating:
      return create();
    case state::recovering:
      return go(state::recovering, action::list);
    case state::listing:
      if (cancelled_) return cleanup(cancel_reason_);
      return go(state::listing, action::list);
    case state::cleaning:
      return go(state::cleaning, action::remove);
    default:
      return finish(make_error_code(dlock::error::invalid_argument));  // unreachable by construction
  }
}

action acquire_machine::on_backoff_done() {
  if (state_ != state::backing_off) return action::done;
  return resume(retries_.resumes());
}

action acquire_machine::on_ensured(reply r) {
  switch (r.result) {
    case step_result::ok:
    case step_result::node_exists:
      return create();
    case step_result::connection_loss:
    case step_result::no_node:  // a parent container was reaped meanwhile
      return retry(state::ensuring, r.ec);
    default:
      return finish(r.ec);
  }
}

action acquire_machine::on_created(reply create_reply, std::string_view created_path, std::int64_t czxid,
                                   reply list, std::span<const std::string> children) {
  switch (create_reply.result) {
    case step_result::ok:
      own_path_.assign(created_path);
      czxid_ = czxid;
      create_unknown_ = false;
      retries_.reset();
      if (cancelled_) return cleanup(cancel_reason_);
      state_ = state::listing;
      return on_listed(list, children);
    case step_result::no_node:
      // The lock path (a container) is missing or was reaped: ensure it, create again.
      if (cancelled_) return finish(cancel_reason_);
      if (!retries_.retry_missing_parent()) return finish(create_reply.ec);
      return go(state::ensuring, action::ensure_path);
    case step_result::connection_loss:
      create_unknown_ = true;
      return retry(state::recovering, create_reply.ec);
    default:
      return finish(create_reply.ec);
  }
}

action acquire_machine::on_listed(reply r, std::span<const std::string> children) {
  if (state_ == state::recovering) {
    switch (r.result) {
      case step_result::ok:
        if (auto child = find_guid_child(guid_, children)) {
          target_path_ = join_path(settings_.lock_path, *child);
          return go(state::checking_owner, action::check_owner);
        }
        return create_never_happened();
      default:
        return recovery_failed(r);
    }
  }
  switch (r.result) {
    case step_result::ok:
      return decide_after_listing(children);
    case step_result::no_node:  // the lock path is gone, so is our node
      own_path_.clear();
      return finish(make_error_code(dlock::error::lost));
    default:
      return failed_in_line(r);
  }
}

action acquire_machine::decide_after_listing(std::span<const std::string> children) {
  auto d = decide(settings_.role, std::string_view(own_path_).substr(settings_.lock_path.size() + 1), children);
  switch (d.outcome) {
    case decision::holder:
      if (cancelled_) return cleanup(cancel_reason_);
      retries_.reset();
      return finish({});
    case decision::wait:
      if (cancelled_) return cleanup(cancel_reason_);
      if (!settings_.wait) return cleanup(make_error_code(dlock::error::taken));
      target_path_ = join_path(settings_.lock_path, d.watch);
      return go(state::watching, action::watch);
    case decision::gone:
    default:
      own_path_.clear();
      return finish(make_error_code(dlock::error::lost));
  }
}

action acquire_machine::create_never_happened() {
  create_unknown_ = false;
  if (hunting_) return finish(result_);  // nothing of ours is left
  return create();
}

action acquire_machine::on_owner(reply r, std::int64_t ephemeral_owner, std::int64_t czxid,
                                 std::int64_t session_id) {
  switch (r.result) {
    case step_result::ok:
      if (ephemeral_owner != session_id) {
        // Not ours: our create on an expired session died with it, so this
        // is someone else's node with the same GUID (a forked twin, say).
        // Never adopt it (Curator once granted two holders that way) and
        // never delete it (it may be the holder's).
        return create_never_happened();
      }
      own_path_ = target_path_;
      czxid_ = czxid;
      create_unknown_ = false;
      retries_.reset();
      if (hunting_) return cleanup(result_);
      return resume(state::listing);
    default:
      return recovery_failed(r);
  }
}

// A recovery step (finding our node by its GUID, reading its owner) that did
// not succeed: no node means the create never happened.
action acquire_machine::recovery_failed(const reply& r) {
  switch (r.result) {
    case step_result::no_node:
      return create_never_happened();
    case step_result::connection_loss:
      return retry(state::recovering, r.ec);
    default:
      return finish(hunting_ ? result_ : r.ec);
  }
}

action acquire_machine::on_watch_set(reply r) { return on_predecessor_watch(r, true); }
action acquire_machine::on_watch_fired(reply r) { return on_predecessor_watch(r, false); }

// Our predecessor's watch, just set (`armed`) or fired: we wait on it, or
// list again (resume() cleans up instead once cancelled). A set that finds
// the predecessor gone left no watch; a wait ends aborted when cancel()
// interrupted it. Any other failure ends our turn in line.
action acquire_machine::on_predecessor_watch(reply r, bool armed) {
  auto list_again = armed ? step_result::no_node : step_result::aborted;
  if (r.result != step_result::ok && r.result != list_again) return failed_in_line(r);
  if (armed && r.result == step_result::ok && !cancelled_) return go(state::waiting, action::wait);
  return resume(state::listing);
}

// A step failed while our node waits its turn: a connection loss lists
// again; a lost session or a closed client took our node with it.
action acquire_machine::failed_in_line(reply r) {
  switch (r.result) {
    case step_result::connection_loss:
      return retry(state::listing, r.ec);
    case step_result::session_lost:
    case step_result::closed:
      own_path_.clear();
      return finish(r.ec);
    default:
      return fail(r);
  }
}

action acquire_machine::on_removed(reply r) {
  // Cleaning our own node: retried for as long as the session lives, since a
  // node left behind would block the lock for everyone.
  if (r.result == step_result::connection_loss) {
    retries_.after_failure_regardless(state::cleaning);
    return go(state::backing_off, action::backoff);
  }
  if (r.result == step_result::failed && dlock::detail::log_enabled(log_level::error))
    dlock::detail::log(log_level::error, "zk lock: could not delete " + own_path_ + ": " + r.ec.message());
  own_path_.clear();
  return go(state::finished, action::done);  // result_ was set by cleanup()
}

bool acquire_machine::cancel(error_code reason) {
  if (state_ == state::finished || cancelled_) return false;
  cancelled_ = true;
  cancel_reason_ = reason;
  return state_ == state::waiting || state_ == state::backing_off;
}

}  // namespace dlock::zk::detail
