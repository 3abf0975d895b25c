// The queue recipe's shared state and its idempotent steps (each retried
// after a connection loss through with_retries): used by the basic mode
// (queue.cpp) and the claim/ack mode (queue_claims.cpp).
#pragma once

#include <dlock/zk/queue.hpp>

#include "retrying.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/deferred.hpp>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

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
  std::shared_ptr<dlock::observer> observer;  // the queue's own, else the client's; may be null
};

inline constexpr auto with_ec = asio::as_tuple(asio::deferred);

/// Every body starts here: partial cancellation too, and no automatic throw
/// after a cancel, so cleanup steps still run; loops ask `cancelled()`.
asio::awaitable<void> setup_cancellation();

/// Creates `path` and its missing ancestors as persistent nodes.
asio::awaitable<error_code> ensure_path(client& zk, retry_policy policy, std::string path);

using item_list = std::tuple<error_code, std::vector<std::string>>;

/// The items in order. A missing queue node is an empty queue.
asio::awaitable<item_list> list_items(client& zk, retry_policy policy, std::string path);

/// The items in order, with `changed` armed for the next change. A missing
/// queue node is created: a children watch needs a node to sit on.
asio::awaitable<item_list> watch_items(client& zk, retry_policy policy, std::string path, watch& changed);

/// Reads an item; no_node means another consumer took it.
asio::awaitable<std::tuple<error_code, std::string, stat>> read_item(client& zk, retry_policy policy,
                                                                     std::string node);

/// Deletes a node of the claim made on `session`, whatever the caller's
/// cancellation says, retrying across reconnects of that session only: once
/// the session is gone, so is the claim, and the same path on a later session
/// may be another consumer's (then `dlock::error::lost`, nothing sent). The
/// check runs on the strand right before the request goes out, so no request
/// reaches a newer session. A node already gone counts as deleted. After a
/// connection loss it retries for as long as the session may live (until it
/// expires, or is `lost` or closed); if it ends first, the lost try may have
/// landed: `dlock::error::removal_uncertain`.
asio::awaitable<error_code> delete_on_session(client& zk, retry_policy policy, std::string node,
                                              std::int64_t session);

}  // namespace dlock::zk::detail
