// The distributed queue recipe, as coroutines over dlock::zk::client: the
// basic mode (offer, poll, take, peek, size). Claim/ack: queue_claims.cpp.
//
// Every step is one ZooKeeper request; the recipe's logic is the order of
// steps and what each error means. Connection loss on an idempotent step is
// retried (the C client holds requests made while it reconnects); the one
// step that is not idempotent, deleting an item, is never retried blindly.
#include "queue_steps.hpp"

#include <dlock/error.hpp>
#include <dlock/log.hpp>
#include <dlock/zk/path.hpp>

#include "zk/recipe/retry.hpp"

#include "queue_items.hpp"
#include "reported.hpp"

#include "detail/spawn_to_handler.hpp"

#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <chrono>

namespace dlock::zk::detail {

queue_state_ptr make_queue_state(client& zk, std::string path, queue_options options) {
  auto q = std::make_shared<queue_state>();
  q->zk.emplace(borrow_session(zk));
  q->path_error = validate_path(path);
  if (path == "/" || path.size() > max_path_size || !valid_retry(options.retry))
    q->path_error = make_error_code(dlock::error::invalid_argument);
  q->claims_path = path + ".claims";
  q->path = std::move(path);
  q->options = std::move(options);
  q->observer = q->options.observer ? q->options.observer : zk.get_options().observer;
  return q;
}

asio::any_io_executor queue_executor(const queue_state& q) noexcept { return q.zk->get_executor(); }

namespace {

// Deletes an item read at `version`. The delete is not idempotent: if its
// reply is lost, look again; a node still there was not deleted (retry), a
// node gone may have been deleted by us or by another consumer: uncertain.
// Once a delete's reply was lost, anything but "still there" is uncertain
// too: a look after a failover can be stale (the lost delete may land after
// it), so a later no_node, or a look that never gets an answer, may hide our
// own removal. The item is then handed over, never dropped.
asio::awaitable<error_code> delete_item(client& zk, retry_policy policy, std::string node, std::int32_t version) {
  const auto uncertain = make_error_code(dlock::error::removal_uncertain);
  bool reply_lost = false;
  retry_counter deletes(policy);
  for (;;) {
    auto [ec] = co_await zk.remove(node, version, uncancellable());
    if (reply_lost && ec == error::no_node) co_return uncertain;
    // The session ended (or the client closed) while the delete was out: it
    // may have been applied first, and the item is not ephemeral, so nobody
    // can tell; the caller gets the item with that doubt, never a loss.
    if (ec == error::session_expired || ec == error::session_moved || ec == dlock::error::closed)
      co_return uncertain;
    if (!is_retryable(ec)) co_return ec;
    reply_lost = true;
    // The looks are paced by the policy; the delete follows a "still there" at once.
    auto look = [&zk, node] { return zk.exists(node, uncancellable()); };
    auto [exists_ec, meta] = co_await with_retries(policy, on_cancel::ignore, std::move(look));
    if (exists_ec || !meta) co_return uncertain;  // gone, or no answer: perhaps by our delete
    if (!deletes.retry_after(ec)) co_return ec;
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
    auto [ec, data, meta] = co_await read_item(*q->zk, q->options.retry, node);
    if (ec == error::no_node) continue;
    if (ec) co_return taken{ec, false, {}};
    error_code deleted = co_await delete_item(*q->zk, q->options.retry, node, meta.version);
    if (deleted == error::no_node || deleted == error::bad_version) continue;
    if (deleted && deleted != dlock::error::removal_uncertain) co_return taken{deleted, false, {}};
    co_return taken{deleted, true, std::move(data)};
  }
  co_return taken{};
}

// Refills the known list when it is used up. False when the queue is empty.
asio::awaitable<std::tuple<error_code, bool>> refill(queue_state_ptr q) {
  if (!q->known.empty()) co_return std::tuple{error_code{}, true};
  auto [ec, items] = co_await list_items(*q->zk, q->options.retry, q->path);
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
      auto [watch_ec, items] = co_await watch_items(*q->zk, q->options.retry, q->path, changed);
      if (watch_ec) co_return std::tuple{watch_ec, std::string{}};
      if (items.empty()) {
        // A cancel that came between steps (say, take_for's deadline while
        // the listing was out) is only recorded: a watch started now would
        // never hear it, and an empty queue would keep the take forever.
        if (co_await cancelled()) co_return std::tuple{make_error_code(asio::error::operation_aborted), std::string{}};
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
  // The take itself unreported: take_for is told to the observer once, by its caller.
  auto take = asio::async_initiate<decltype(asio::deferred), void(error_code, std::string)>(
      [](auto h, queue_state_ptr state) {
        auto executor = state->zk->get_executor();
        dlock::detail::spawn_to_handler(executor, take_body(std::move(state)), queue_handler<std::string>(std::move(h)));
      },
      asio::deferred, q);
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
      auto [read_ec, data, meta] = co_await read_item(*q->zk, q->options.retry, node);
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
  auto [ec, items] = co_await list_items(*q->zk, q->options.retry, q->path);
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
    if (error_code parent = co_await ensure_path(*q->zk, q->options.retry, q->path)) co_return std::tuple{parent, std::string{}};
  }
}
}  // namespace

void start_offer(const queue_state_ptr& q, std::string item, queue_handler<std::string> h) {
  auto body = maybe_reported(q, queue_event::offered, offer_body(q, std::move(item)));
  dlock::detail::spawn_to_handler(q->zk->get_executor(), std::move(body), std::move(h));
}
void start_poll(const queue_state_ptr& q, queue_handler<std::optional<std::string>> h) {
  auto body = maybe_reported(q, queue_event::taken, poll_body(q));
  dlock::detail::spawn_to_handler(q->zk->get_executor(), std::move(body), std::move(h));
}
void start_remove(const queue_state_ptr& q, queue_handler<std::string> h) {
  dlock::detail::spawn_to_handler(q->zk->get_executor(), maybe_reported(q, queue_event::taken, required(poll_body(q))),
                                  std::move(h));
}
void start_take(const queue_state_ptr& q, queue_handler<std::string> h) {
  auto body = maybe_reported(q, queue_event::taken, take_body(q));
  dlock::detail::spawn_to_handler(q->zk->get_executor(), std::move(body), std::move(h));
}
void start_take_for(const queue_state_ptr& q, std::chrono::steady_clock::duration limit,
                    queue_handler<std::string> h) {
  dlock::detail::spawn_to_handler(q->zk->get_executor(), maybe_reported(q, queue_event::taken, take_for_body(q, limit)),
                                  std::move(h));
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

}  // namespace dlock::zk::detail
