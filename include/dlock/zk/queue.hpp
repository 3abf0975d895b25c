/// @file
/// The ZooKeeper recipe's distributed FIFO queue.
#pragma once

#include <dlock/config.hpp>
#include <dlock/detail/initiation.hpp>
#include <dlock/observer.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/detail/retry.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace dlock::zk {

/// How a `zk::queue` behaves.
struct queue_options {
  /// The largest item accepted. ZooKeeper drops the connection of a client
  /// that sends a packet over its `jute.maxbuffer` (1 MiB - 1 by default), so
  /// larger items fail here with `dlock::error::invalid_argument` before
  /// anything is sent. The default leaves room for the request's own fields.
  std::size_t max_item_size = 1024 * 1024 - 1024;
  /// Node data of claim nodes (claim/ack mode): who holds a claim, for
  /// operators. dlock adds a second line, "claim <GUID>", unique per claim.
  std::string identifier;
  /// Retries of a step cut by a connection loss (reads, claims, deletes;
  /// never an offer, whose retry could duplicate the item).
  retry_policy retry;
  /// Told of this queue's offers and takes (dlock/observer.hpp); none: the client's.
  std::shared_ptr<dlock::observer> observer{};
};

/// An item taken in claim/ack mode: it stays in the queue, claimed by this
/// session, until `ack` removes it or `release` (or the end of the session)
/// returns it to the queue.
struct claimed_item {
  std::string data;  ///< the item
  std::string name;  ///< the item's node name ("qn-0000000042")

  /// The claim node's creation zxid: `ack` and `release` delete a claim only
  /// if it is still this one (0: any claim owned by the current session).
  std::int64_t claim_zxid = 0;
};

namespace detail {
struct queue_state;
using queue_state_ptr = std::shared_ptr<queue_state>;
template <class... T>
using queue_handler = asio::any_completion_handler<void(error_code, T...)>;

void start_offer(const queue_state_ptr& q, std::string item, queue_handler<std::string> h);
void start_poll(const queue_state_ptr& q, queue_handler<std::optional<std::string>> h);
void start_remove(const queue_state_ptr& q, queue_handler<std::string> h);
void start_take(const queue_state_ptr& q, queue_handler<std::string> h);
void start_take_for(const queue_state_ptr& q, std::chrono::steady_clock::duration limit,
                    queue_handler<std::string> h);
void start_peek(const queue_state_ptr& q, queue_handler<std::optional<std::string>> h);
void start_element(const queue_state_ptr& q, queue_handler<std::string> h);
void start_size(const queue_state_ptr& q, queue_handler<std::size_t> h);
void start_take_claimed(const queue_state_ptr& q, queue_handler<claimed_item> h);
void start_ack(const queue_state_ptr& q, claimed_item item, queue_handler<> h);
void start_release_claim(const queue_state_ptr& q, claimed_item item, queue_handler<> h);
queue_state_ptr make_queue_state(client& zk, std::string path, queue_options options);
asio::any_io_executor queue_executor(const queue_state& q) noexcept;
}  // namespace detail

/// A distributed FIFO queue on ZooKeeper.
///
/// Items are persistent-sequential `qn-<seq>` children of the queue node
/// (the ZooKeeper recipe's format), taken in sequence order. Children
/// without the `qn-` prefix are ignored, with a log line.
///
/// Each item is delivered to exactly one consumer. A consumer that finds its
/// head taken by another tries the next item and lists again only once its
/// listing is used up; `take` waits with one children watch, never polling.
///
/// **The basic mode's window.** Taking is "read, then delete": if the delete
/// is sent and the connection drops before its reply, nobody can tell
/// whether it removed the item (this consumer's delete may have landed, or
/// another consumer's). dlock never hides that: the take completes with
/// `dlock::error::removal_uncertain` and the item's data, and the caller
/// decides. Where an item must be neither lost nor duplicated, use the
/// claim/ack mode (`take_claimed`, `ack`), in the style of kazoo's
/// LockingQueue: a claim is an ephemeral node under the sibling
/// `<path>.claims`, so an item taken but not acknowledged returns to the
/// queue when its consumer's session ends. Do not mix both modes of
/// consumers on one queue (basic consumers do not see claims).
///
/// **Cancellation never loses an item.** Operations complete on the
/// handler's associated executor; cancellation (terminal and partial)
/// abandons them, except that once `take`/`poll`/`remove` has read an item
/// its removal runs to the end, and the operation then completes with the
/// item (and no error) although it was cancelled. So a cancelled take still
/// hands over an item it took: never throw its result away. Awaitable
/// operators do exactly that (`take() || timer` discards the take's item when
/// the timer wins): use `take_for`, or bind a cancellation slot and read the
/// result. Each operation's reference says what its cancellation does.
///
/// The queue keeps a borrowed handle on the client's session: destroying the
/// client first makes its operations complete with `dlock::error::closed`.
class queue {
 public:
  /// `path`: the queue node (created with its parents on first offer).
  queue(client& zk, std::string path, queue_options options = {})
      : state_(detail::make_queue_state(zk, std::move(path), std::move(options))) {}
  /// Move-only, like the locks: a copy would share the cached item list.
  queue(queue&&) noexcept = default;
  queue& operator=(queue&&) = delete;
  queue(const queue&) = delete;
  queue& operator=(const queue&) = delete;

  /// The executor the queue's operations run on (the client's strand).
  asio::any_io_executor get_executor() const noexcept { return detail::queue_executor(*state_); }

  /// Appends an item (creating the queue node and its parents if missing).
  ///
  /// @par Handler signature
  /// `void(error_code, std::string node_name)`.
  /// @par Executor
  /// The handler's associated executor (else the client's strand); never
  /// inside this call.
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`.
  /// An item whose create reply comes after the cancel is deleted again, but
  /// a consumer may take it first, and after a connection drop it may stay:
  /// a cancelled offer may have delivered its item.
  /// @par Errors
  /// `dlock::error::invalid_argument` (bad queue path, or an item over
  /// `queue_options::max_item_size`; nothing sent), `zk::error::connection_loss`
  /// (never retried: the item may or may not be in the queue), and those of
  /// `client::create()`.
  /// @par Lifetime
  /// The item is moved into the operation. The queue object may be destroyed
  /// while it runs; destroying the client gives `dlock::error::closed`.
  template <class CompletionToken = default_token>
  auto offer(std::string item, CompletionToken&& token = {}) {
    return dlock::detail::async_initiate_on<CompletionToken, void(error_code, std::string)>(*this,
        [](auto h, detail::queue_state_ptr q, std::string data) {
          detail::start_offer(q, std::move(data), detail::queue_handler<std::string>(std::move(h)));
        },
        token, state_, std::move(item));
  }

  /// Removes and returns the head, or `std::nullopt` when the queue is empty.
  ///
  /// @par Handler signature
  /// `void(error_code, std::optional<std::string>)`.
  /// @par Executor, Lifetime
  /// As `offer()`.
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`,
  /// nothing removed; but once an item is read, its removal runs to the end
  /// and the operation completes with the item and no error, although
  /// cancelled.
  /// @par Errors
  /// `dlock::error::removal_uncertain` *with the item* (the delete's reply was
  /// lost: another consumer may have it too; the default token throws it and
  /// the item is lost to you, so pass `asio::as_tuple(asio::deferred)`),
  /// `invalid_argument` (bad queue path), or a step's error
  /// (`zk::error::session_expired`, `dlock::error::closed`, `connection_loss`
  /// once its retries run out, ...).
  template <class CompletionToken = default_token>
  auto poll(CompletionToken&& token = {}) {
    return initiate<std::optional<std::string>>(&detail::start_poll, std::forward<CompletionToken>(token));
  }

  /// Like `poll`, but an empty queue is the error `dlock::error::empty`.
  ///
  /// @par Handler signature
  /// `void(error_code, std::string)`.
  /// @par Executor, Cancellation, Lifetime
  /// As `poll()`.
  /// @par Errors
  /// `dlock::error::empty`, and those of `poll()`.
  template <class CompletionToken = default_token>
  auto remove(CompletionToken&& token = {}) {
    return initiate<std::string>(&detail::start_remove, std::forward<CompletionToken>(token));
  }

  /// Removes and returns the head, waiting for an item if the queue is empty
  /// (with one children watch; a missing queue node is created to watch it).
  ///
  /// @par Handler signature
  /// `void(error_code, std::string)`.
  /// @par Executor, Lifetime
  /// As `offer()`.
  /// @par Cancellation
  /// As `poll()`: a cancelled take may still complete with an item (no
  /// error). Read its result; never race it in `||`.
  /// @par Errors
  /// Those of `poll()`, and `zk::error::session_expired` when the session
  /// expires while waiting (the take is not restarted).
  template <class CompletionToken = default_token>
  auto take(CompletionToken&& token = {}) {
    return initiate<std::string>(&detail::start_take, std::forward<CompletionToken>(token));
  }

  /// Like `take`, waiting at most `limit`.
  ///
  /// @par Handler signature
  /// `void(error_code, std::string)`.
  /// @par Executor, Cancellation, Lifetime
  /// As `take()`.
  /// @par Errors
  /// `dlock::error::timed_out` when no item was taken by `limit` (an item whose
  /// removal began before is delivered, even if the removal ends after it),
  /// and those of `take()`.
  template <class CompletionToken = default_token>
  auto take_for(std::chrono::steady_clock::duration limit, CompletionToken&& token = {}) {
    return dlock::detail::async_initiate_on<CompletionToken, void(error_code, std::string)>(*this,
        [](auto h, detail::queue_state_ptr q, std::chrono::steady_clock::duration d) {
          detail::start_take_for(q, d, detail::queue_handler<std::string>(std::move(h)));
        },
        token, state_, limit);
  }

  /// The head without removing it, or `std::nullopt` when empty.
  ///
  /// @par Handler signature
  /// `void(error_code, std::optional<std::string>)`.
  /// @par Executor, Lifetime
  /// As `offer()`.
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`
  /// (it only reads).
  /// @par Errors
  /// `dlock::error::invalid_argument` (bad queue path), or a ZooKeeper error
  /// once retries on connection loss run out.
  template <class CompletionToken = default_token>
  auto peek(CompletionToken&& token = {}) {
    return initiate<std::optional<std::string>>(&detail::start_peek, std::forward<CompletionToken>(token));
  }

  /// The head without removing it; an empty queue is `dlock::error::empty`.
  ///
  /// @par Handler signature
  /// `void(error_code, std::string)`.
  /// @par Executor, Cancellation, Lifetime
  /// As `peek()`.
  /// @par Errors
  /// `dlock::error::empty`, and those of `peek()`.
  template <class CompletionToken = default_token>
  auto element(CompletionToken&& token = {}) {
    return initiate<std::string>(&detail::start_element, std::forward<CompletionToken>(token));
  }

  /// The number of items (a missing queue node counts as empty).
  ///
  /// @par Handler signature
  /// `void(error_code, std::size_t)`.
  /// @par Executor, Cancellation, Lifetime, Errors
  /// As `peek()`.
  template <class CompletionToken = default_token>
  auto size(CompletionToken&& token = {}) {
    return initiate<std::size_t>(&detail::start_size, std::forward<CompletionToken>(token));
  }

  /// Claim/ack mode: claims the head, waiting for an item if none is free
  /// (the queue node and `<path>.claims` are created if missing).
  ///
  /// @par Handler signature
  /// `void(error_code, claimed_item)`.
  /// @par Executor, Lifetime
  /// As `offer()`.
  /// @par Cancellation
  /// Terminal and partial: completes with `asio::error::operation_aborted`
  /// and never with an item, unlike `take()`: a claim made meanwhile is
  /// deleted again (one whose create's outcome stayed unknown is looked for
  /// and deleted in the background while the session lives).
  /// @par Errors
  /// `dlock::error::invalid_argument` (bad queue path), `zk::error::session_expired`
  /// while waiting, or a ZooKeeper error once retries on connection loss run out.
  template <class CompletionToken = default_token>
  auto take_claimed(CompletionToken&& token = {}) {
    return initiate<claimed_item>(&detail::start_take_claimed, std::forward<CompletionToken>(token));
  }

  /// Claim/ack mode: removes a claimed item for good. `dlock::error::lost`
  /// if the claim is no longer this session's (it expired: the item went back
  /// to the queue; nothing was deleted). `dlock::error::removal_uncertain` if
  /// the session ended while a connection drop kept the ack's delete
  /// unconfirmed: it may have removed the item, or the item went back and
  /// may be delivered again. An ack deletes only while the session that made
  /// the claim lives, never another's claim.
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor, Lifetime
  /// As `offer()`.
  /// @par Cancellation
  /// None: an ack always runs to the end (cancellation is ignored).
  /// @par Errors
  /// `dlock::error::lost`, `dlock::error::removal_uncertain` (above),
  /// `invalid_argument` (bad queue path), or a ZooKeeper error once retries
  /// on connection loss run out (the claim is still ours: ack again).
  template <class CompletionToken = default_token>
  auto ack(claimed_item item, CompletionToken&& token = {}) {
    return dlock::detail::async_initiate_on<CompletionToken, void(error_code)>(*this,
        [](auto h, detail::queue_state_ptr q, claimed_item claimed) {
          detail::start_ack(q, std::move(claimed), detail::queue_handler<>(std::move(h)));
        },
        token, state_, std::move(item));
  }

  /// Claim/ack mode: gives a claimed item back to the queue. Deletes the
  /// claim only if it is still this one, on the session that made it:
  /// otherwise `dlock::error::lost` and nothing is deleted (the claim expired
  /// or was released already; the item may be another consumer's now).
  ///
  /// @par Handler signature
  /// `void(error_code)`.
  /// @par Executor, Cancellation, Lifetime, Errors
  /// As `ack()`: it always runs to the end.
  template <class CompletionToken = default_token>
  auto release(claimed_item item, CompletionToken&& token = {}) {
    return dlock::detail::async_initiate_on<CompletionToken, void(error_code)>(*this,
        [](auto h, detail::queue_state_ptr q, claimed_item claimed) {
          detail::start_release_claim(q, std::move(claimed), detail::queue_handler<>(std::move(h)));
        },
        token, state_, std::move(item));
  }

 private:
  // Operations that take no argument and complete with one value.
  template <class Result, class CompletionToken>
  auto initiate(void (*start)(const detail::queue_state_ptr&, detail::queue_handler<Result>),
                CompletionToken&& token) {
    return dlock::detail::async_initiate_on<CompletionToken, void(error_code, Result)>(*this,
        [](auto h, detail::queue_state_ptr q, decltype(start) s) {
          s(q, detail::queue_handler<Result>(std::move(h)));
        },
        token, state_, start);
  }

  detail::queue_state_ptr state_;
};

}  // namespace dlock::zk
