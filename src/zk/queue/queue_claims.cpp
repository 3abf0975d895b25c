// The queue recipe's claim/ack mode: an item is claimed by an ephemeral
// node in the sibling "<path>.claims", acknowledged by deleting it, and
// returned to the queue by releasing the claim or by the end of its session.
#include "queue_steps.hpp"

#include <dlock/error.hpp>
#include <dlock/log.hpp>

#include "zk/recipe/node_names.hpp"  // make_guid
#include "queue_items.hpp"
#include "reported.hpp"

#include "detail/spawn_to_handler.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>

#include <algorithm>
#include <set>

namespace dlock::zk::detail {
namespace {

// A claim we made: the session it lives on and its creation zxid.
struct claim_ref {
  std::int64_t session = 0;
  std::int64_t czxid = 0;
};

// A claim's delete that ended with its session: the claim went with it
// (ephemeral), whether or not our delete landed.
bool claim_ended_with_session(const error_code& ec) {
  return ec == dlock::error::lost || ec == dlock::error::removal_uncertain;
}

// Ours: our GUID in the data, on the current session.
bool is_our_claim(client& zk, const std::string& data, const stat& meta, const std::string& ours) {
  return data == ours && meta.ephemeral_owner != 0 && meta.ephemeral_owner == zk.session_id();
}

// A claim whose create's outcome stayed unknown, looked for and deleted if
// it is ours, for as long as the session that may own it lives: nobody was
// handed its item, so left alone it would hold the item until the session ends.
asio::awaitable<void> recover_claim(queue_state_ptr q, std::string claim, std::string ours, std::int64_t session) {
  client& zk = *q->zk;
  retry_counter retries(q->options.retry);
  while (zk.session_id() == session) {
    auto [ec, data, meta] = co_await zk.get(claim, uncancellable());
    if (!ec && is_our_claim(zk, data, meta, ours)) {
      error_code deleted = co_await delete_on_session(zk, q->options.retry, claim, session);
      if (!is_retryable(deleted)) co_return;
    } else if (!is_retryable(ec)) {
      co_return;  // not there, another's, or the session is over (expired, closed)
    }
    retries.count_failure();  // unbounded while the session lives: only the count saturates
    co_await pause(retries.delay(), on_cancel::ignore);
  }
  if (dlock::detail::log_enabled(log_level::info))
    dlock::detail::log(log_level::info, "zk queue: gave up recovering " + claim + ": its session ended");
}

// Our claim on `claim`, created whatever the caller's cancellation says (an
// interrupted create could leave a claim nobody knows of). The data carries
// a fresh GUID, so after a lost reply the claim is recognised by reading it:
// ours only with our GUID on our session (another consumer on this session
// may claim the same item). If the outcome is still unknown when the retries
// run out, a background task keeps looking while the session lives.
asio::awaitable<std::tuple<error_code, claim_ref>> create_claim(queue_state_ptr q, std::string claim) {
  client& zk = *q->zk;
  const std::string ours = claim_node_data(q->options.identifier, make_guid());
  bool unknown = false;      // a create of ours may have landed unseen: read before creating again
  bool maybe_ours = false;   // some create of ours had an unknown outcome
  std::int64_t sent_on = 0;  // the session of our last create
  error_code last;
  for (int attempt = 1; attempt - 1 <= q->options.retry.max_attempts; ++attempt) {  // no overflow at INT_MAX
    if (unknown) {
      auto [ec, data, meta] = co_await zk.get(claim, uncancellable());
      if (!ec && is_our_claim(zk, data, meta, ours)) co_return std::tuple{ec, claim_ref{meta.ephemeral_owner, meta.czxid}};
      if (!ec) co_return std::tuple{make_error_code(error::node_exists), claim_ref{}};
      last = ec;
      if (ec == error::no_node) unknown = false;  // it did not land: create again
      else if (!is_retryable(ec)) break;
      else {
        co_await pause(backoff_delay(q->options.retry, attempt), on_cancel::ignore);
        continue;
      }
    }
    sent_on = zk.session_id();
    auto [ec, made] = co_await zk.create(claim, ours, create_mode::ephemeral, uncancellable());
    if (!ec) co_return std::tuple{ec, claim_ref{made.stat.ephemeral_owner, made.stat.czxid}};
    last = ec;
    if (ec == error::node_exists && maybe_ours) {
      unknown = true;  // perhaps our own earlier create, landed late: read it
      continue;
    }
    if (!is_retryable(ec)) co_return std::tuple{ec, claim_ref{}};
    unknown = maybe_ours = true;
    co_await pause(backoff_delay(q->options.retry, attempt), on_cancel::ignore);
  }
  if (unknown) asio::co_spawn(zk.get_executor(), recover_claim(q, claim, ours, sent_on), asio::detached);
  co_return std::tuple{last, claim_ref{}};
}

using claim_result = std::tuple<error_code, claimed_item>;

// Tries to claim the first free item. found=false: none could be claimed.
asio::awaitable<std::tuple<error_code, bool, claimed_item>> claim_first(queue_state_ptr q,
                                                                        std::vector<std::string> items,
                                                                        std::vector<std::string> claims) {
  std::set<std::string> claimed(claims.begin(), claims.end());
  for (const auto& name : items) {
    if (claimed.count(name)) continue;
    if (co_await cancelled()) break;
    std::string claim = q->claims_path + "/" + name;
    auto [ec, ref] = co_await create_claim(q, claim);
    if (ec == error::node_exists) continue;
    if (ec) co_return std::tuple{ec, false, claimed_item{}};
    std::string node = q->path + "/" + name;
    auto [read_ec, data, meta] = co_await read_item(*q->zk, q->options.retry, node);
    if (read_ec || co_await cancelled()) {
      co_await delete_on_session(*q->zk, q->options.retry, claim, ref.session);  // give it back (gone with its session otherwise)
      if (read_ec == error::no_node) continue;  // acknowledged by its previous claimant meanwhile
      co_return std::tuple{read_ec ? read_ec : make_error_code(asio::error::operation_aborted), false, claimed_item{}};
    }
    // Read when the servers may already have expired the session (the
    // client paused past its timeout): the claim may be gone and the item
    // another consumer's. Not delivered; the claim is given back.
    if (!session_vouched_for(*q->zk)) {
      co_await delete_on_session(*q->zk, q->options.retry, claim, ref.session);
      co_return std::tuple{make_error_code(dlock::error::expired), false, claimed_item{}};
    }
    co_return std::tuple{error_code{}, true, claimed_item{std::move(data), name, ref.czxid}};
  }
  bool stop = co_await cancelled();
  co_return std::tuple{stop ? make_error_code(asio::error::operation_aborted) : error_code{}, false, claimed_item{}};
}

// take_claimed(): claims the head, waiting on the items and the claims (a
// claim released or expired frees its item) when nothing is free.
asio::awaitable<claim_result> take_claimed_body(queue_state_ptr q) {
  co_await setup_cancellation();
  if (q->path_error) co_return claim_result{q->path_error, {}};
  for (;;) {
    watch items_changed, claims_changed;
    auto [ec, items] = co_await watch_items(*q->zk, q->options.retry, q->path, items_changed);
    if (ec) co_return claim_result{ec, {}};
    auto [claims_ec, claims] = co_await watch_items(*q->zk, q->options.retry, q->claims_path, claims_changed);
    if (claims_ec) co_return claim_result{claims_ec, {}};
    auto [claim_ec, found, item] = co_await claim_first(q, std::move(items), std::move(claims));
    if (claim_ec || found) co_return claim_result{claim_ec, std::move(item)};
    // A cancel that came between steps is only recorded: the waits below would never hear it.
    if (co_await cancelled()) co_return claim_result{make_error_code(asio::error::operation_aborted), {}};
    auto [order, items_ec, items_event, claims_wait_ec, claims_event] =
        co_await asio::experimental::make_parallel_group(items_changed.wait(asio::deferred),
                                                         claims_changed.wait(asio::deferred))
            .async_wait(asio::experimental::wait_for_one(), asio::deferred);
    error_code woke = order[0] == 0 ? items_ec : claims_wait_ec;
    if (woke) co_return claim_result{woke, {}};
  }
}

// The session the item's claim lives on, if the claim is still the one
// taken (same creation zxid) and owned by the current session; else `lost`.
asio::awaitable<std::tuple<error_code, std::int64_t>> check_claim(queue_state_ptr q, claimed_item item) {
  std::string claim = q->claims_path + "/" + item.name;
  client& zk = *q->zk;
  auto look = [&zk, claim] { return zk.exists(claim, uncancellable()); };
  auto [ec, meta] = co_await with_retries(q->options.retry, on_cancel::ignore, std::move(look));
  if (ec) co_return std::tuple{ec, std::int64_t{0}};
  bool ours = meta && meta->ephemeral_owner != 0 && meta->ephemeral_owner == zk.session_id() &&
              (item.claim_zxid == 0 || meta->czxid == item.claim_zxid);
  if (!ours) co_return std::tuple{make_error_code(dlock::error::lost), std::int64_t{0}};
  co_return std::tuple{ec, meta->ephemeral_owner};
}

// ack(): removes the item, but only while the claim is still this session's.
asio::awaitable<std::tuple<error_code>> ack_body(queue_state_ptr q, claimed_item item) {
  co_await setup_cancellation();
  if (q->path_error) co_return std::tuple{q->path_error};
  auto [owned, session] = co_await check_claim(q, item);
  if (owned) co_return std::tuple{owned};  // lost: expired, the item went back to the queue
  // While `session` lives the claim is ours, so nobody else deletes the
  // item: retrying is safe. Once it ends, the item may be another's.
  // Once the session ends, a sent delete whose reply was lost leaves the
  // item's fate unknown: removal_uncertain, never `lost` (which says it is back).
  if (error_code ec = co_await delete_on_session(*q->zk, q->options.retry, q->path + "/" + item.name, session)) co_return std::tuple{ec};
  error_code ec = co_await delete_on_session(*q->zk, q->options.retry, q->claims_path + "/" + item.name, session);
  if (claim_ended_with_session(ec)) ec = {};  // the item is gone; the claim went with its session
  co_return std::tuple{ec};
}

// release(): deletes our claim, only if it is still the one taken, on its session.
asio::awaitable<std::tuple<error_code>> release_claim_body(queue_state_ptr q, claimed_item item) {
  co_await setup_cancellation();
  if (q->path_error) co_return std::tuple{q->path_error};
  auto [owned, session] = co_await check_claim(q, item);
  if (owned) co_return std::tuple{owned};
  error_code ec = co_await delete_on_session(*q->zk, q->options.retry, q->claims_path + "/" + item.name, session);
  // Deleted or ended with its session, the claim is gone and the item back.
  if (claim_ended_with_session(ec)) ec = dlock::error::lost;
  co_return std::tuple{ec};
}
}  // namespace

void start_take_claimed(const queue_state_ptr& q, queue_handler<claimed_item> h) {
  dlock::detail::spawn_to_handler(q->zk->get_executor(), maybe_reported(q, queue_event::taken, take_claimed_body(q)),
                                  std::move(h));
}
void start_ack(const queue_state_ptr& q, claimed_item item, queue_handler<> h) {
  dlock::detail::spawn_to_handler(q->zk->get_executor(), ack_body(q, std::move(item)), std::move(h));
}
void start_release_claim(const queue_state_ptr& q, claimed_item item, queue_handler<> h) {
  dlock::detail::spawn_to_handler(q->zk->get_executor(), release_claim_body(q, std::move(item)), std::move(h));
}


}  // namespace dlock::zk::detail
