// The semaphore's acquire: Curator's InterProcessSemaphoreV2 protocol, taking
// all `count` leases under one hold of the `locks` mutex.
//
// Why that is safe beside Curator (which takes its leases one mutex hold
// each): an acquirer only succeeds on a listing made after its creates that
// counts at most max_leases children, its own included. Of two acquirers, the
// one listing last sees the other's nodes, so no listing can grant more than
// max_leases; the mutex only keeps acquirers from waking as a herd.
#include "semaphore_recipe.hpp"

#include <dlock/error.hpp>
#include <dlock/log.hpp>
#include <dlock/zk/error.hpp>

#include "zk/recipe/node_names.hpp"

#include <algorithm>

namespace dlock::zk::detail {

lease_verdict judge_leases(std::span<const std::string> children, std::span<const lease_node> ours,
                           std::size_t max_leases) {
  for (const auto& node : ours) {
    std::string_view name = node.path;
    name.remove_prefix(name.rfind('/') + 1);
    if (std::find(children.begin(), children.end(), name) == children.end()) return lease_verdict::missing;
  }
  // Curator counts every child of `leases`, not only lease nodes: so do we,
  // or the two would disagree about a full semaphore.
  return children.size() <= max_leases ? lease_verdict::granted : lease_verdict::full;
}

std::string lease_prefix(std::string_view guid) { return "_c_" + std::string(guid) + "-lease-"; }

using action = semaphore_machine::action;

semaphore_machine::semaphore_machine(settings s, std::string guid)
    : settings_(std::move(s)), guid_(std::move(guid)), retries_(settings_.retry) {
  locks_path_ = join_path(settings_.path, "locks");
  leases_path_ = join_path(settings_.path, "leases");
  create_path_ = join_path(leases_path_, lease_prefix(guid_));
}

action semaphore_machine::go(state s, action a) {
  state_ = s;
  return a;
}

action semaphore_machine::finish(error_code ec) {
  result_ = ec;
  return go(state::finished, action::done);
}

action semaphore_machine::start() {
  if (cancelled_) return finish(cancel_reason_);
  return go(state::locking, action::lock);
}

action semaphore_machine::create() {
  to_create_ = settings_.count - std::min(settings_.count, nodes_.size());
  if (to_create_ == 0) return list();
  return go(state::creating, action::create);
}

action semaphore_machine::list() { return go(state::listing, action::list); }

// The end of every failure: our nodes go first (handed to the ownership-checked
// removal), then the mutex, then, if creates went unanswered, the search for
// their nodes; the result is the first failure's.
action semaphore_machine::wind_up(error_code ec) {
  if (!winding_) {
    winding_ = true;
    granted_ = false;
    result_ = ec;
  }
  if (!nodes_.empty()) return go(state::cleaning, action::remove);
  if (locked_) return go(state::unlocking, action::unlock);
  if (unknown_ > 0) return hunt();
  return finish(result_);
}

// Creates went unanswered and the acquire has failed: the caller hears it now
// (hunting()), and the search for their nodes by GUID goes on, paced, until
// they are found and deleted, proven absent, or the session ends.
action semaphore_machine::hunt() {
  if (!hunting_) {
    hunting_ = true;
    if (dlock::detail::log_enabled(log_level::info))
      dlock::detail::log(log_level::info, "zk semaphore: looking for lease nodes with GUID " + guid_ + " under " +
                                              leases_path_ + " in the background");
  }
  retries_.at_slowest(state::recovering);
  return go(state::backing_off, action::backoff);
}

action semaphore_machine::retry(state then, error_code ec) {
  if (hunting_) return hunt();
  if (retries_.after_failure(then)) return go(state::backing_off, action::backoff);
  return wind_up(winding_ ? result_ : ec);
}

action semaphore_machine::resume(state s) {
  switch (s) {
    case state::ensuring:
      if (cancelled_) return wind_up(cancel_reason_);
      return go(state::ensuring, action::ensure);
    case state::recovering:  // even when cancelled: the search is cleanup
      return go(state::recovering, action::recover);
    case state::listing:
      if (cancelled_) return wind_up(cancel_reason_);
      return list();
    case state::confirming:
      if (cancelled_) return wind_up(cancel_reason_);
      return go(state::confirming, action::confirm);
    default:
      return wind_up(make_error_code(dlock::error::invalid_argument));  // unreachable by construction
  }
}

action semaphore_machine::on_backoff_done() {
  if (state_ != state::backing_off) return action::done;
  return resume(retries_.resumes());
}

action semaphore_machine::on_locked(reply r) {
  if (r.result != step_result::ok) return finish(cancelled_ ? cancel_reason_ : r.ec);  // the mutex left nothing
  locked_ = true;
  if (cancelled_) return wind_up(cancel_reason_);
  return create();
}

action semaphore_machine::on_ensured(reply r) {
  if (cancelled_) return wind_up(cancel_reason_);
  switch (r.result) {
    case step_result::ok:
    case step_result::node_exists:
      return create();
    case step_result::connection_loss:
    case step_result::no_node:  // a parent container was reaped meanwhile
      return retry(state::ensuring, r.ec);
    default:
      return wind_up(r.ec);
  }
}

action semaphore_machine::on_created(std::span<const created_lease> creates, reply list_reply,
                                     std::span<const std::string> children) {
  error_code session_end, failure, missing_parent, lost_reply;
  for (const auto& c : creates) {
    switch (c.r.result) {
      case step_result::ok:
        nodes_.push_back({c.path, c.czxid, c.owner});
        break;
      case step_result::connection_loss:
        ++unknown_;
        lost_reply = c.r.ec;
        break;
      case step_result::no_node:
        missing_parent = c.r.ec;
        break;
      case step_result::session_lost:
      case step_result::closed:
        if (!session_end) session_end = c.r.ec;
        break;
      default:
        if (!failure) failure = c.r.ec;
    }
  }
  if (session_end) {
    unknown_ = 0;  // whatever they made died with the session
    return wind_up(session_end);
  }
  if (failure) return wind_up(failure);
  if (cancelled_) return wind_up(cancel_reason_);
  if (unknown_ > 0) return retry(state::recovering, lost_reply);
  if (missing_parent) {  // the first acquire on this path: `leases` is made on demand, as Curator does
    if (!retries_.retry_missing_parent()) return wind_up(missing_parent);
    return go(state::ensuring, action::ensure);
  }
  retries_.reset();
  state_ = state::listing;
  return on_listed(list_reply, children);
}

action semaphore_machine::on_recovered(reply r, std::span<const std::string> children) {
  switch (r.result) {
    case step_result::ok: {
      targets_.clear();
      const auto mine = "_c_" + guid_ + "-";
      for (const auto& child : children) {
        if (!child.starts_with(mine)) continue;
        auto path = join_path(leases_path_, child);
        auto known = std::any_of(nodes_.begin(), nodes_.end(), [&](const lease_node& n) { return n.path == path; });
        if (!known) targets_.push_back(std::move(path));
      }
      if (targets_.empty()) return recovered();
      return go(state::checking_owners, action::check_owners);
    }
    case step_result::no_node:  // no `leases` node: none of our creates made a node
      return recovered();
    case step_result::connection_loss:
      return retry(state::recovering, r.ec);
    case step_result::session_lost:
    case step_result::closed:
      unknown_ = 0;
      return wind_up(r.ec);
    default:
      return wind_up(r.ec);  // hunting: give up (the session's end takes the node)
  }
}

action semaphore_machine::on_owners(std::span<const owner_reply> owners, std::int64_t session_id) {
  error_code lost_reply, session_end;
  for (std::size_t i = 0; i < owners.size() && i < targets_.size(); ++i) {
    const auto& o = owners[i];
    if (o.r.result == step_result::ok) {
      // Only a node of this session is ours; one with our GUID but another
      // owner (a forked twin) is never adopted and never deleted.
      if (o.ephemeral_owner == session_id) nodes_.push_back({targets_[i], o.czxid, o.ephemeral_owner});
    } else if (o.r.result == step_result::connection_loss) {
      lost_reply = o.r.ec;
    } else if (o.r.result == step_result::session_lost || o.r.result == step_result::closed) {
      session_end = o.r.ec;
    }
  }
  targets_.clear();
  if (session_end) {
    unknown_ = 0;
    return wind_up(session_end);
  }
  if (lost_reply) return retry(state::recovering, lost_reply);  // adopted ones are kept
  return recovered();
}

// Every unanswered create is accounted for: its node is adopted, or there is none.
action semaphore_machine::recovered() {
  unknown_ = 0;
  if (winding_) return wind_up(result_);
  if (cancelled_) return wind_up(cancel_reason_);
  retries_.reset();
  return create();
}

action semaphore_machine::on_listed(reply r, std::span<const std::string> children) {
  switch (r.result) {
    case step_result::ok:
      return decide(children);
    case step_result::no_node:  // `leases` is gone, so are our nodes
      return wind_up(make_error_code(dlock::error::lost));
    case step_result::connection_loss:
      return retry(state::listing, r.ec);
    default:
      return wind_up(r.ec);
  }
}

action semaphore_machine::decide(std::span<const std::string> children) {
  switch (judge_leases(children, nodes_, settings_.max_leases)) {
    case lease_verdict::missing:
      // Curator deletes its lease and retries; a node of ours vanishing means
      // the session had a problem or someone deleted it: we report it.
      return wind_up(make_error_code(dlock::error::lost));
    case lease_verdict::full:
      if (cancelled_) return wind_up(cancel_reason_);
      if (!settings_.wait) return wind_up(make_error_code(dlock::error::taken));
      return go(state::waiting, action::wait);
    case lease_verdict::granted:
    default:
      if (cancelled_) return wind_up(cancel_reason_);
      granted_ = true;
      result_ = {};
      return go(state::unlocking, action::unlock);
  }
}

action semaphore_machine::on_watch_fired(reply r) {
  switch (r.result) {
    case step_result::ok:
      return list();
    case step_result::aborted:
      if (cancelled_) return wind_up(cancel_reason_);
      return list();
    case step_result::connection_loss:
      return retry(state::listing, r.ec);
    default:
      return wind_up(r.ec);
  }
}

action semaphore_machine::on_removed() {
  nodes_.clear();  // handed over: the removal goes on in the background if it must
  return wind_up(result_);
}

action semaphore_machine::on_unlocked(bool connected) {
  locked_ = false;
  if (granted_) {
    if (cancelled_) return wind_up(cancel_reason_);  // a cancel that came while unlocking
    // The connection dropped after the grant. The leases are ours only if the
    // session lives, and a success on a suspended connection would be lost
    // at once (loss_policy::standard): confirm them once it is back.
    if (!connected) return retry(state::confirming, make_error_code(zk::error::connection_loss));
    return finish({});
  }
  return wind_up(result_);
}

// After the grant, on a connection that had dropped: every lease must still
// be the node we created, on our session.
action semaphore_machine::on_confirmed(std::span<const owner_reply> owners, std::int64_t session_id) {
  error_code lost_reply;
  for (std::size_t i = 0; i < owners.size() && i < nodes_.size(); ++i) {
    const auto& o = owners[i];
    if (session_id != nodes_[i].owner) return wind_up(make_error_code(zk::error::session_expired));
    switch (o.r.result) {
      case step_result::ok:
        if (o.ephemeral_owner != nodes_[i].owner || o.czxid != nodes_[i].czxid)
          return wind_up(make_error_code(dlock::error::lost));
        break;
      case step_result::no_node:
        return wind_up(make_error_code(dlock::error::lost));
      case step_result::connection_loss:
        lost_reply = o.r.ec;
        break;
      default:
        return wind_up(o.r.ec);
    }
  }
  if (cancelled_) return wind_up(cancel_reason_);
  if (lost_reply) return retry(state::confirming, lost_reply);
  return finish({});
}

bool semaphore_machine::cancel(error_code reason) {
  if (state_ == state::finished || cancelled_ || hunting_) return false;
  cancelled_ = true;
  cancel_reason_ = reason;
  return state_ == state::locking || state_ == state::waiting || state_ == state::backing_off;
}

}  // namespace dlock::zk::detail
