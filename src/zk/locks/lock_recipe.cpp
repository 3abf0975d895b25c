#include <dlock/zk/detail/lock_recipe.hpp>

#include <dlock/error.hpp>
#include <dlock/log.hpp>

#include "detail/random.hpp"

#include <algorithm>
#include <atomic>
#include <array>
#include <random>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include <pthread.h>

namespace dlock::zk::detail {
namespace {

struct marker {
  std::string_view text;
  lock_kind kind;
};
// "__rlock__" before "__lock__" is not needed for correctness (neither is a
// suffix of the other) but keeps the intent obvious.
constexpr std::array<marker, 5> markers{{
    {"-lock-", lock_kind::exclusive},
    {"__READ__", lock_kind::read},
    {"__WRIT__", lock_kind::write},
    {"__rlock__", lock_kind::read},
    {"__lock__", lock_kind::write},
}};

bool all_digits(std::string_view s) noexcept {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::int64_t to_number(std::string_view digits) noexcept {
  std::int64_t v = 0;
  for (char c : digits) v = v * 10 + (c - '0');
  return v;
}

// Exactly what the server's "%010d" of a signed 32-bit counter can print.
bool parse_sequence(std::string_view s, std::int32_t& out) noexcept {
  if (s.size() == 10 && all_digits(s)) {
    auto v = to_number(s);
    if (v > INT32_MAX) return false;
    out = static_cast<std::int32_t>(v);
    return true;
  }
  if (s.size() == 10 && s[0] == '-' && all_digits(s.substr(1))) {
    out = static_cast<std::int32_t>(-to_number(s.substr(1)));
    return true;
  }
  if (s.size() == 11 && s[0] == '-' && s[1] != '0' && all_digits(s.substr(1))) {
    auto v = to_number(s.substr(1));
    if (v > std::int64_t{INT32_MAX} + 1) return false;
    out = static_cast<std::int32_t>(-v);
    return true;
  }
  return false;
}

std::string join(std::string_view parent, std::string_view child) {
  std::string out;
  out.reserve(parent.size() + 1 + child.size());
  out.append(parent).append("/").append(child);
  return out;
}

}  // namespace

namespace {
// Bumped in every forked child: a child must not repeat its parent's (or a
// sibling's) GUIDs, or GUID recovery could take a twin's node for ours.
std::atomic<unsigned> fork_generation{0};
void on_fork_in_child() noexcept { fork_generation.fetch_add(1, std::memory_order_relaxed); }

std::mt19937_64 seeded_engine() {
  std::array<std::uint32_t, 8> seed{};
  dlock::detail::fill_random(seed.data(), sizeof seed);
  std::seed_seq sequence(seed.begin(), seed.end());
  return std::mt19937_64(sequence);
}
}  // namespace

// A GUID needs to be unique, not secret: a per-thread engine seeded from
// getrandom saves a system call per acquire. It is reseeded after fork().
std::string make_guid() {
  static const bool fork_hook = pthread_atfork(nullptr, nullptr, on_fork_in_child) == 0;
  (void)fork_hook;
  thread_local std::mt19937_64 engine = seeded_engine();
  thread_local unsigned generation = fork_generation.load(std::memory_order_relaxed);
  if (auto now = fork_generation.load(std::memory_order_relaxed); now != generation) {
    engine = seeded_engine();
    generation = now;
  }
  std::array<unsigned char, 16> bytes{};
  for (std::size_t i = 0; i < bytes.size(); i += 8) {
    auto word = engine();
    for (std::size_t j = 0; j < 8; ++j) bytes[i + j] = static_cast<unsigned char>(word >> (8 * j));
  }
  bytes[6] = static_cast<unsigned char>((bytes[6] & 0x0f) | 0x40);  // version 4
  bytes[8] = static_cast<unsigned char>((bytes[8] & 0x3f) | 0x80);  // RFC 4122 variant
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(hex[bytes[i] >> 4]);
    out.push_back(hex[bytes[i] & 0x0f]);
  }
  return out;
}

bool is_guid(std::string_view text) noexcept {
  if (text.size() != 36) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    bool dash_place = i == 8 || i == 13 || i == 18 || i == 23;
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (dash_place ? c != '-' : !hex) return false;
  }
  return true;
}

std::string node_prefix(lock_role role, std::string_view guid) {
  std::string_view name = role == lock_role::exclusive ? "lock-"
                          : role == lock_role::reader  ? "__READ__"
                                                       : "__WRIT__";
  std::string out;
  out.reserve(3 + guid.size() + 1 + name.size());
  out.append("_c_").append(guid).append("-").append(name);
  return out;
}

std::optional<lock_node> parse_node(std::string_view name) noexcept {
  lock_node node;
  node.name = name;
  if (name.starts_with("_c_") && name.size() > 40 && name[39] == '-' && is_guid(name.substr(3, 36)))
    node.guid = name.substr(3, 36);
  // A known marker right before the sequence settles the ambiguity of
  // "-lock-1500000000" (positive) against "-lock" followed by "-1500000000".
  for (std::size_t length : {std::size_t{10}, std::size_t{11}}) {
    for (const auto& m : markers) {
      if (name.size() < m.text.size() + length) continue;
      auto at = name.size() - length;
      if (name.substr(at - m.text.size(), m.text.size()) != m.text) continue;
      if (!parse_sequence(name.substr(at), node.sequence)) continue;
      node.kind = m.kind;
      return node;
    }
  }
  if (name.size() >= 10 && parse_sequence(name.substr(name.size() - 10), node.sequence)) {
    node.kind = lock_kind::foreign;
    return node;
  }
  return std::nullopt;
}

std::vector<lock_node> sort_contenders(std::span<const std::string> children) {
  std::vector<lock_node> nodes;
  nodes.reserve(children.size());
  for (const auto& child : children) {
    if (auto node = parse_node(child)) {
      nodes.push_back(*node);
    } else if (dlock::detail::log_enabled(log_level::warning)) {
      dlock::detail::log(log_level::warning,
                         "zk lock: ignoring child without a sequence suffix: " + child);
    }
  }
  if (nodes.empty()) return nodes;
  // Offsets from any one live sequence order them correctly across the wrap,
  // as long as the live ones span less than 2^31 (always, in practice).
  auto reference = static_cast<std::uint32_t>(nodes.front().sequence);
  auto offset = [reference](const lock_node& n) {
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(n.sequence) - reference);
  };
  std::sort(nodes.begin(), nodes.end(),
            [&](const lock_node& a, const lock_node& b) { return offset(a) < offset(b); });
  return nodes;
}

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

std::optional<std::string_view> find_guid_child(std::string_view guid,
                                                std::span<const std::string> children) noexcept {
  for (const auto& child : children) {
    std::string_view name = child;
    if (name.size() > 3 + guid.size() && name.starts_with("_c_") && name.substr(3, guid.size()) == guid &&
        name[3 + guid.size()] == '-')
      return name;
  }
  return std::nullopt;
}

// --- acquire_machine ---

using action = acquire_machine::action;

acquire_machine::acquire_machine(settings s, std::string guid)
    : settings_(std::move(s)), guid_(std::move(guid)) {
  create_path_ = join(settings_.lock_path, node_prefix(settings_.role, guid_));
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
  if (++attempts_ > settings_.retry.max_attempts) {
    if (create_unknown_) return hunt(ec);
    return cleanup(ec);
  }
  auto delay = settings_.retry.initial_backoff * (1LL << std::min(attempts_ - 1, 20));
  delay_ = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(delay), settings_.retry.max_backoff);
  after_backoff_ = then;
  return go(state::backing_off, action::backoff);
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
  delay_ = settings_.retry.max_backoff;
  after_backoff_ = state::recovering;
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
  return resume(after_backoff_);
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
      attempts_ = 0;
      if (cancelled_) return cleanup(cancel_reason_);
      state_ = state::listing;
      return on_listed(list, children);
    case step_result::no_node:
      // The lock path (a container) is missing or was reaped: ensure it, create again.
      if (cancelled_) return finish(cancel_reason_);
      if (++attempts_ > settings_.retry.max_attempts) return finish(create_reply.ec);
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
          target_path_ = join(settings_.lock_path, *child);
          return go(state::checking_owner, action::check_owner);
        }
        return create_never_happened();
      case step_result::no_node:
        return create_never_happened();
      case step_result::connection_loss:
        return retry(state::recovering, r.ec);
      default:
        return finish(hunting_ ? result_ : r.ec);
    }
  }
  switch (r.result) {
    case step_result::ok:
      return decide_after_listing(children);
    case step_result::connection_loss:
      return retry(state::listing, r.ec);
    case step_result::no_node:  // the lock path is gone, so is our node
      own_path_.clear();
      return finish(make_error_code(dlock::error::lost));
    case step_result::session_lost:
    case step_result::closed:
      own_path_.clear();
      return finish(r.ec);
    default:
      return fail(r);
  }
}

action acquire_machine::decide_after_listing(std::span<const std::string> children) {
  auto d = decide(settings_.role, std::string_view(own_path_).substr(settings_.lock_path.size() + 1), children);
  switch (d.outcome) {
    case decision::holder:
      if (cancelled_) return cleanup(cancel_reason_);
      attempts_ = 0;
      return finish({});
    case decision::wait:
      if (cancelled_) return cleanup(cancel_reason_);
      if (!settings_.wait) return cleanup(make_error_code(dlock::error::taken));
      target_path_ = join(settings_.lock_path, d.watch);
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
      attempts_ = 0;
      if (hunting_) return cleanup(result_);
      return resume(state::listing);
    case step_result::no_node:
      return create_never_happened();
    case step_result::connection_loss:
      return retry(state::recovering, r.ec);
    default:
      return finish(hunting_ ? result_ : r.ec);
  }
}

action acquire_machine::on_watch_set(reply r) {
  switch (r.result) {
    case step_result::ok:
      if (cancelled_) return cleanup(cancel_reason_);
      return go(state::waiting, action::wait);
    case step_result::no_node:  // the predecessor is already gone: no watch was left
      return resume(state::listing);
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

action acquire_machine::on_watch_fired(reply r) {
  switch (r.result) {
    case step_result::ok:
      return resume(state::listing);
    case step_result::aborted:
      if (cancelled_) return cleanup(cancel_reason_);
      return resume(state::listing);
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
    attempts_ = std::min(attempts_ + 1, 20);
    auto delay = settings_.retry.initial_backoff * (1LL << (attempts_ - 1));
    delay_ = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(delay), settings_.retry.max_backoff);
    after_backoff_ = state::cleaning;
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
