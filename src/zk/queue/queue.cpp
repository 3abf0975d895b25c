// The distributed queue recipe, as coroutines over dlock::zk::client.
//
// Every step is one ZooKeeper request; the recipe's logic is the order of
// steps and what each error means. Connection loss on an idempotent step is
// retried (the C client holds requests made while it reconnects); the one
// step that is not idempotent, deleting an item, is never retried blindly.
#include <dlock/zk/queue.hpp>

#include <dlock/error.hpp>
#include <dlock/log.hpp>
#include <dlock/zk/detail/lock_recipe.hpp>  // make_guid
#include <dlock/zk/detail/queue_items.hpp>
#include <dlock/zk/path.hpp>

#include "detail/spawn_to_handler.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <set>
#include <tuple>

namespace dlock::zk::detail {

struct queue_state {
  std::optional<client> zk;  // borrowed: outlives the user's handle if work is pending
  // Items from the last listing not yet tried, oldest first. The recipe lists
  // again only once this is used up: items created later have higher
  // sequences, so its head is still the oldest item present. Touched only on
  // the client's strand, where every operation's coroutine runs.
  std::deque<std::string> known;
  std::string path;
  std::string claims_path;  // sibling "<path>.claims": ephemeral claim nodes, one per claimed item
  queue_options options;
  error_code path_error;
};

queue_state_ptr make_queue_state(client& zk, std::string path, queue_options options) {
  auto q = std::make_shared<queue_state>();
  q->zk.emplace(borrow_session(zk));
  q->path_error = validate_path(path);
  if (path == "/") q->path_error = make_error_code(dlock::error::invalid_argument);
  q->claims_path = path + ".claims";
  q->path = std::move(path);
  q->options = std::move(options);
  return q;
}

namespace {

constexpr auto with_ec = asio::as_tuple(asio::deferred);
// Not bound to the coroutine's cancellation: for the steps a cancel must not interrupt.
// (A fresh rvalue each time: Asio 1.81's binder does not accept a const token.)
auto uncancellable() {
  return asio::bind_cancellation_slot(asio::cancellation_slot(), asio::as_tuple(asio::use_awaitable));
}
constexpr int max_attempts = 10;

bool is_connection_loss(const error_code& ec) {
  return ec == error::connection_loss || ec == error::operation_timeout;
}

// Every body starts here: partial cancellation too, and no automatic throw
// after a cancel, so cleanup steps still run; loops ask `cancelled()`.
asio::awaitable<void> setup_cancellation() {
  co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
  co_await asio::this_coro::throw_if_cancelled(false);
}

asio::awaitable<bool> cancelled() {
  auto state = co_await asio::this_coro::cancellation_state;
  co_return state.cancelled() != asio::cancellation_type::none;
}

asio::awaitable<void> backoff(int attempt) {
  asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::milliseconds(50 * (attempt + 1)));
  co_await timer.async_wait(with_ec);
}

// Creates `path` and its missing ancestors as persistent nodes.
asio::awaitable<error_code> ensure_path(client& zk, std::string path) {
  for (std::size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    std::string prefix = path.substr(0, slash);
    for (int attempt = 0;; ++attempt) {
      auto [ec, made] = co_await zk.create(prefix, std::string(), create_mode::persistent, with_ec);
      if (!ec || ec == error::node_exists) break;
      if (!is_connection_loss(ec) || attempt + 1 == max_attempts) co_return ec;
      co_await backoff(attempt);
    }
    if (slash == std::string::npos) co_return error_code{};
  }
}

// The items in order. A missing queue node is an empty queue.
asio::awaitable<std::tuple<error_code, std::vector<std::string>>> list_items(client& zk, std::string path) {
  for (int attempt = 0;; ++attempt) {
    auto [ec, children, parent] = co_await zk.get_children(path, with_ec);
    if (!ec) co_return std::tuple{ec, queue_items_in_order(children)};
    if (ec == error::no_node) co_return std::tuple{error_code{}, std::vector<std::string>{}};
    if (!is_connection_loss(ec) || attempt + 1 == max_attempts) co_return std::tuple{ec, std::vector<std::string>{}};
    co_await backoff(attempt);
  }
}

// The items in order, with `changed` armed for the next change. A missing
// queue node is created: a children watch needs a node to sit on.
asio::awaitable<std::tuple<error_code, std::vector<std::string>>> watch_items(client& zk, std::string path,
                                                                               watch& changed) {
  for (int attempt = 0;; ++attempt) {
    auto [ec, children, parent] = co_await zk.get_children(path, changed, with_ec);
    if (!ec) co_return std::tuple{ec, queue_items_in_order(children)};
    if (ec == error::no_node) {
      if (error_code made = co_await ensure_path(zk, path)) co_return std::tuple{made, std::vector<std::string>{}};
    } else if (!is_connection_loss(ec) || attempt + 1 == max_attempts) {
      co_return std::tuple{ec, std::vector<std::string>{}};
    } else {
      co_await backoff(attempt);
    }
    if (co_await cancelled()) co_return std::tuple{make_error_code(asio::error::operation_aborted), std::vector<std::string>{}};
  }
}

// Reads an item; no_node means another consumer took it.
asio::awaitable<std::tuple<error_code, std::string, stat>> read_item(client& zk, std::string node) {
  for (int attempt = 0;; ++attempt) {
    auto [ec, data, meta] = co_await zk.get(node, with_ec);
    if (!is_connection_loss(ec) || attempt + 1 == max_attempts) co_return std::tuple{ec, std::move(data), meta};
    co_await backoff(attempt);
  }
}

asio::awaitable<void> pause_uncancellable(client& zk, int attempt) {
  asio::steady_timer pause(zk.get_executor(), std::chrono::milliseconds(50 * (attempt + 1)));
  co_await pause.async_wait(uncancellable());
}

// Deletes a node of the claim made on `session`, whatever the caller's
// cancellation says, retrying across reconnects of that session only: once
// the session is gone, so is the claim, and the same path on a later session
// may be another consumer's (then `dlock::error::lost`, nothing sent). The
// check runs on the strand right before the request goes out, so no request
// reaches a newer session. A node already gone counts as deleted.
asio::awaitable<error_code> delete_on_session(client& zk, std::string node, std::int64_t session) {
  for (int attempt = 0;; ++attempt) {
    if (zk.session_id() != session) co_return make_error_code(dlock::error::lost);
    auto [ec] = co_await zk.remove(node, -1, uncancellable());
    if (ec == error::no_node) co_return error_code{};
    if (!is_connection_loss(ec) || attempt + 1 == max_attempts) co_return ec;
    co_await pause_uncancellable(zk, attempt);
  }
}

// Deletes an item read at `version`. The delete is not idempotent: if its
// reply is lost, look again; a node still there was not deleted (retry), a
// node gone may have been deleted by us or by another consumer: uncertain.
// Once a delete's reply was lost, anything but "still there" is uncertain
// too: a look after a failover can be stale (the lost delete may land after
// it), so a later no_node, or a look that never gets an answer, may hide our
// own removal. The item is then handed over, never dropped.
asio::awaitable<error_code> delete_item(client& zk, std::string node, std::int32_t version) {
  const auto uncertain = make_error_code(dlock::error::removal_uncertain);
  bool reply_lost = false;
  for (int attempt = 0;; ++attempt) {
    auto [ec] = co_await zk.remove(node, version, uncancellable());
    if (reply_lost && ec == error::no_node) co_return uncertain;
    // The session ended (or the client closed) while the delete was out: it
    // may have been applied first, and the item is not ephemeral, so nobody
    // can tell; the caller gets the item with that doubt, never a loss.
    if (ec == error::session_expired || ec == error::session_moved || ec == dlock::error::closed)
      co_return uncertain;
    if (!is_connection_loss(ec)) co_return ec;
    reply_lost = true;
    for (int look = 0;; ++look) {
      auto [exists_ec, meta] = co_await zk.exists(node, uncancellable());
      if (!exists_ec && !meta) co_return uncertain;
      if (!exists_ec) break;  // still there: the delete did not happen
      if (!is_connection_loss(exists_ec) || look + 1 == max_attempts) co_return uncertain;
      co_await pause_uncancellable(zk, look);
    }
    if (attempt + 1 == max_attempts) co_return ec;
  }
}

struct taken {
  error_code ec;
  bool found = false;  // false: every listed item was taken by others
  std::string data;
};

// The recipe's consumer step: try the known items in order; an item taken
// by someone else means try the next one. Once an item is read, its delete
// runs to the end even if the caller cancels, so no item is ever lost.
asio::awaitable<taken> take_first(queue_state_ptr q) {
  while (!q->known.empty()) {
    if (co_await cancelled()) co_return taken{make_error_code(asio::error::operation_aborted), false, {}};
    std::string node = q->path + "/" + q->known.front();
    q->known.pop_front();
    auto [ec, data, meta] = co_await read_item(*q->zk, node);
    if (ec == error::no_node) continue;
    if (ec) co_return taken{ec, false, {}};
    error_code deleted = co_await delete_item(*q->zk, node, meta.version);
    if (deleted == error::no_node || deleted == error::bad_version) continue;
    if (deleted && deleted != dlock::error::removal_uncertain) co_return taken{deleted, false, {}};
    co_return taken{deleted, true, std::move(data)};
  }
  co_return taken{};
}

// Refills the known list when it is used up. False when the queue is empty.
asio::awaitable<std::tuple<error_code, bool>> refill(queue_state_ptr q) {
  if (!q->known.empty()) co_return std::tuple{error_code{}, true};
  auto [ec, items] = co_await list_items(*q->zk, q->path);
  q->known.assign(items.begin(), items.end());
  co_return std::tuple{ec, !q->known.empty()};
}

using optional_item = std::tuple<error_code, std::optional<std::string>>;

// poll(): the head, removed, or nullopt once a fresh listing is empty.
asio::awaitable<optional_item> poll_body(queue_state_ptr q) {
  co_await setup_cancellation();
  if (q->path_error) co_return optional_item{q->path_error, std::nullopt};
  for (;;) {
    auto [ec, any] = co_await refill(q);
    if (ec || !any) co_return optional_item{ec, std::nullopt};
    auto result = co_await take_first(q);
    if (result.found) co_return optional_item{result.ec, std::move(result.data)};
    if (result.ec) co_return optional_item{result.ec, std::nullopt};
    // Every known item went to other consumers: list again.
  }
}

// take(): like poll(), but an empty listing waits on one children watch.
asio::awaitable<std::tuple<error_code, std::string>> take_body(queue_state_ptr q) {
  co_await setup_cancellation();
  if (q->path_error) co_return std::tuple{q->path_error, std::string{}};
  for (;;) {
    auto [ec, any] = co_await refill(q);
    if (ec) co_return std::tuple{ec, std::string{}};
    if (!any) {
      // Empty: list again with a watch (an item may have arrived since).
      watch changed;
      auto [watch_ec, items] = co_await watch_items(*q->zk, q->path, changed);
      if (watch_ec) co_return std::tuple{watch_ec, std::string{}};
      if (items.empty()) {
        auto [wait_ec, event] = co_await changed.wait(with_ec);
        if (wait_ec) co_return std::tuple{wait_ec, std::string{}};
        continue;
      }
      if (q->known.empty()) q->known.assign(items.begin(), items.end());
    }
    auto result = co_await take_first(q);
    if (result.found || result.ec) co_return std::tuple{result.ec, std::move(result.data)};
  }
}

// take_for(): take() against a timer, in a parallel group, which (unlike
// awaitable operators) keeps the take's result when the timer wins: a take
// cancelled during its item's removal still completes with the item.
asio::awaitable<std::tuple<error_code, std::string>> take_for_body(queue_state_ptr q,
                                                                   std::chrono::steady_clock::duration limit) {
  co_await setup_cancellation();
  asio::steady_timer deadline(co_await asio::this_coro::executor, limit);
  auto take = asio::async_initiate<decltype(asio::deferred), void(error_code, std::string)>(
      [](auto h, queue_state_ptr state) { start_take(state, queue_handler<std::string>(std::move(h))); }, asio::deferred,
      q);
  auto [order, ec, item, timer_ec] =
      co_await asio::experimental::make_parallel_group(std::move(take), deadline.async_wait(asio::deferred))
          .async_wait(asio::experimental::wait_for_one(), asio::deferred);
  if (ec == asio::error::operation_aborted && order[0] == 1 && !timer_ec) ec = dlock::error::timed_out;
  co_return std::tuple{ec, std::move(item)};
}

// peek(): the head's data (left in the queue), or nullopt once a fresh listing is empty.
asio::awaitable<optional_item> peek_body(queue_state_ptr q) {
  co_await setup_cancellation();
  if (q->path_error) co_return optional_item{q->path_error, std::nullopt};
  for (;;) {
    auto [ec, any] = co_await refill(q);
    if (ec || !any) co_return optional_item{ec, std::nullopt};
    while (!q->known.empty()) {
      std::string node = q->path + "/" + q->known.front();
      auto [read_ec, data, meta] = co_await read_item(*q->zk, node);
      if (read_ec == error::no_node) {
        if (!q->known.empty() && node == q->path + "/" + q->known.front()) q->known.pop_front();
        continue;
      }
      if (read_ec) co_return optional_item{read_ec, std::nullopt};
      co_return optional_item{error_code{}, std::move(data)};
    }
    if (co_await cancelled()) co_return optional_item{make_error_code(asio::error::operation_aborted), std::nullopt};
  }
}

asio::awaitable<std::tuple<error_code, std::string>> required(asio::awaitable<optional_item> body) {
  auto [ec, item] = co_await std::move(body);
  if (!ec && !item) ec = dlock::error::empty;
  co_return std::tuple{ec, item ? std::move(*item) : std::string{}};
}

asio::awaitable<std::tuple<error_code, std::size_t>> size_body(queue_state_ptr q) {
  co_await setup_cancellation();
  if (q->path_error) co_return std::tuple{q->path_error, std::size_t{0}};
  auto [ec, items] = co_await list_items(*q->zk, q->path);
  co_return std::tuple{ec, items.size()};
}

// offer(): one persistent-sequential create. Not retried on connection loss:
// a lost reply leaves the outcome unknown, and a retry could duplicate the
// item, so the caller gets connection_loss and decides.
asio::awaitable<std::tuple<error_code, std::string>> offer_body(queue_state_ptr q, std::string item) {
  co_await setup_cancellation();
  if (q->path_error) co_return std::tuple{q->path_error, std::string{}};
  if (error_code too_big = check_item_size(item.size(), q->options.max_item_size))
    co_return std::tuple{too_big, std::string{}};
  std::string prefix = q->path + "/" + std::string(queue_item_prefix);
  for (int attempt = 0;; ++attempt) {
    auto [ec, made] = co_await q->zk->create(prefix, item, create_mode::persistent_sequential, with_ec);
    if (ec != error::no_node || attempt == 1) {
      auto name = ec ? std::string{} : made.path.substr(made.path.rfind('/') + 1);
      co_return std::tuple{ec, std::move(name)};
    }
    if (error_code parent = co_await ensure_path(*q->zk, q->path)) co_return std::tuple{parent, std::string{}};
  }
}

// --- claim/ack mode ---

// A claim we made: the session it lives on and its creation zxid.
struct claim_ref {
  std::int64_t session = 0;
  std::int64_t czxid = 0;
};

// Ours: our GUID in the data, on the current session.
bool is_our_claim(client& zk, const std::string& data, const stat& meta, const std::string& ours) {
  return data == ours && meta.ephemeral_owner != 0 && meta.ephemeral_owner == zk.session_id();
}

// A claim whose create's outcome stayed unknown, looked for and deleted if
// it is ours, for as long as the session that may own it lives: nobody was
// handed its item, so left alone it would hold the item until the session ends.
asio::awaitable<void> recover_claim(queue_state_ptr q, std::string claim, std::string ours, std::int64_t session) {
  client& zk = *q->zk;
  for (int attempt = 0; zk.session_id() == session; ++attempt) {
    auto [ec, data, meta] = co_await zk.get(claim, uncancellable());
    if (!ec && is_our_claim(zk, data, meta, ours)) {
      error_code deleted = co_await delete_on_session(zk, claim, session);
      if (!is_connection_loss(deleted)) co_return;
    } else if (!is_connection_loss(ec)) {
      co_return;  // not there, another's, or the session is over (expired, closed)
    }
    asio::steady_timer pause(zk.get_executor(), std::chrono::milliseconds(std::min(50 * (attempt + 1), 1000)));
    co_await pause.async_wait(uncancellable());
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
  for (int attempt = 0; attempt < max_attempts; ++attempt) {
    if (unknown) {
      auto [ec, data, meta] = co_await zk.get(claim, uncancellable());
      if (!ec && is_our_claim(zk, data, meta, ours)) co_return std::tuple{ec, claim_ref{meta.ephemeral_owner, meta.czxid}};
      if (!ec) co_return std::tuple{make_error_code(error::node_exists), claim_ref{}};
      last = ec;
      if (ec == error::no_node) unknown = false;  // it did not land: create again
      else if (!is_connection_loss(ec)) break;
      else {
        co_await pause_uncancellable(zk, attempt);
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
    if (!is_connection_loss(ec)) co_return std::tuple{ec, claim_ref{}};
    unknown = maybe_ours = true;
    co_await pause_uncancellable(zk, attempt);
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
    auto [read_ec, data, meta] = co_await read_item(*q->zk, node);
    if (read_ec || co_await cancelled()) {
      co_await delete_on_session(*q->zk, claim, ref.session);  // give it back (gone with its session otherwise)
      if (read_ec == error::no_node) continue;  // acknowledged by its previous claimant meanwhile
      co_return std::tuple{read_ec ? read_ec : make_error_code(asio::error::operation_aborted), false, claimed_item{}};
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
    auto [ec, items] = co_await watch_items(*q->zk, q->path, items_changed);
    if (ec) co_return claim_result{ec, {}};
    auto [claims_ec, claims] = co_await watch_items(*q->zk, q->claims_path, claims_changed);
    if (claims_ec) co_return claim_result{claims_ec, {}};
    auto [claim_ec, found, item] = co_await claim_first(q, std::move(items), std::move(claims));
    if (claim_ec || found) co_return claim_result{claim_ec, std::move(item)};
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
  for (int attempt = 0;; ++attempt) {
    auto [ec, meta] = co_await q->zk->exists(claim, uncancellable());
    if (!ec) {
      bool ours = meta && meta->ephemeral_owner != 0 && meta->ephemeral_owner == q->zk->session_id() &&
                  (item.claim_zxid == 0 || meta->czxid == item.claim_zxid);
      if (!ours) co_return std::tuple{make_error_code(dlock::error::lost), std::int64_t{0}};
      co_return std::tuple{ec, meta->ephemeral_owner};
    }
    if (!is_connection_loss(ec) || attempt + 1 == max_attempts) co_return std::tuple{ec, std::int64_t{0}};
    co_await pause_uncancellable(*q->zk, attempt);
  }
}

// ack(): removes the item, but only while the claim is still this session's.
asio::awaitable<std::tuple<error_code>> ack_body(queue_state_ptr q, claimed_item item) {
  co_await setup_cancellation();
  if (q->path_error) co_return std::tuple{q->path_error};
  auto [owned, session] = co_await check_claim(q, item);
  if (owned) co_return std::tuple{owned};  // lost: expired, the item went back to the queue
  // While `session` lives the claim is ours, so nobody else deletes the
  // item: retrying is safe. Once it ends, the item may be another's.
  if (error_code ec = co_await delete_on_session(*q->zk, q->path + "/" + item.name, session)) co_return std::tuple{ec};
  error_code ec = co_await delete_on_session(*q->zk, q->claims_path + "/" + item.name, session);
  if (ec == dlock::error::lost) ec = {};  // the item is gone; the claim went with its session
  co_return std::tuple{ec};
}

// release(): deletes our claim, only if it is still the one taken, on its session.
asio::awaitable<std::tuple<error_code>> release_claim_body(queue_state_ptr q, claimed_item item) {
  co_await setup_cancellation();
  if (q->path_error) co_return std::tuple{q->path_error};
  auto [owned, session] = co_await check_claim(q, item);
  if (owned) co_return std::tuple{owned};
  co_return std::tuple{co_await delete_on_session(*q->zk, q->claims_path + "/" + item.name, session)};
}

}  // namespace

void start_offer(const queue_state_ptr& q, std::string item, queue_handler<std::string> h) {
  dlock::detail::spawn_to_handler(q->zk->get_executor(), offer_body(q, std::move(item)), std::move(h));
}
void start_poll(const queue_state_ptr& q, queue_handler<std::optional<std::string>> h) {
  dlock::detail::spawn_to_handler(q->zk->get_executor(), poll_body(q), std::move(h));
}
void start_remove(const queue_state_ptr& q, queue_handler<std::string> h) {
  dlock::detail::spawn_to_handler(q->zk->get_executor(), required(poll_body(q)), std::move(h));
}
void start_take(const queue_state_ptr& q, queue_handler<std::string> h) {
  dlock::detail::spawn_to_handler(q->zk->get_executor(), take_body(q), std::move(h));
}
void start_take_for(const queue_state_ptr& q, std::chrono::steady_clock::duration limit,
                    queue_handler<std::string> h) {
  dlock::detail::spawn_to_handler(q->zk->get_executor(), take_for_body(q, limit), std::move(h));
}
void start_peek(const queue_state_ptr& q, queue_handler<std::optional<std::string>> h) {
  dlock::detail::spawn_to_handler(q->zk->get_executor(), peek_body(q), std::move(h));
}
void start_element(const queue_state_ptr& q, queue_handler<std::string> h) {
  dlock::detail::spawn_to_handler(q->zk->get_executor(), required(peek_body(q)), std::move(h));
}
void start_size(const queue_state_ptr& q, queue_handler<std::size_t> h) {
  dlock::detail::spawn_to_handler(q->zk->get_executor(), size_body(q), std::move(h));
}
void start_take_claimed(const queue_state_ptr& q, queue_handler<claimed_item> h) {
  dlock::detail::spawn_to_handler(q->zk->get_executor(), take_claimed_body(q), std::move(h));
}
void start_ack(const queue_state_ptr& q, claimed_item item, queue_handler<> h) {
  dlock::detail::spawn_to_handler(q->zk->get_executor(), ack_body(q, std::move(item)), std::move(h));
}
void start_release_claim(const queue_state_ptr& q, claimed_item item, queue_handler<> h) {
  dlock::detail::spawn_to_handler(q->zk->get_executor(), release_claim_body(q, std::move(item)), std::move(h));
}

}  // namespace dlock::zk::detail
