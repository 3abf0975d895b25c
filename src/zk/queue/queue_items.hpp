// The queue recipe's I/O-free part: which children are items, and their order.
#pragma once

#include <dlock/config.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::zk::detail {

/// Item nodes are "qn-" + the server's 10-digit sequence (the recipe's format).
inline constexpr std::string_view queue_item_prefix = "qn-";

/// True for "qn-<sequence>".
bool is_queue_item(std::string_view child) noexcept;

/// The item names among `children`, oldest first (by the sequence number,
/// across its 2^31 wrap). Other children are left out with a log line.
std::vector<std::string> queue_items_in_order(std::span<const std::string> children);

/// A claim node's data: the operator-facing `identifier`, then a line with
/// the claim's own GUID, so the claimant can recognise its claim after a
/// create whose reply was lost (its session's other claims carry other GUIDs).
std::string claim_node_data(std::string_view identifier, std::string_view guid);

/// Empty if an item of `size` bytes may be sent, else `dlock::error::invalid_argument`.
error_code check_item_size(std::size_t size, std::size_t max_item_size) noexcept;

}  // namespace dlock::zk::detail
