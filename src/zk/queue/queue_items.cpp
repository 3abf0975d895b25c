#include "queue_items.hpp"

#include <dlock/error.hpp>
#include <dlock/log.hpp>

#include "zk/recipe/node_names.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

namespace dlock::zk::detail {
namespace {

// "qn-" + the server's sequence suffix.
std::optional<std::int32_t> item_sequence(std::string_view child) noexcept {
  if (!child.starts_with(queue_item_prefix)) return std::nullopt;
  return parse_sequence(child.substr(queue_item_prefix.size()));
}

}  // namespace

bool is_queue_item(std::string_view child) noexcept { return item_sequence(child).has_value(); }

std::vector<std::string> queue_items_in_order(std::span<const std::string> children) {
  std::vector<std::pair<std::int32_t, const std::string*>> items;
  items.reserve(children.size());
  for (const auto& child : children) {
    auto sequence = item_sequence(child);
    if (!sequence) {
      if (dlock::detail::log_enabled(log_level::info))
        dlock::detail::log(log_level::info, "zk queue: ignoring child '" + child + "' (not a qn- item)");
      continue;
    }
    items.emplace_back(*sequence, &child);
  }
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return sequence_before(a.first, b.first); });
  std::vector<std::string> out;
  out.reserve(items.size());
  for (auto& item : items) out.push_back(*item.second);
  return out;
}

std::string claim_node_data(std::string_view identifier, std::string_view guid) {
  std::string data(identifier);
  data += "\nclaim ";
  data += guid;
  return data;
}

error_code check_item_size(std::size_t size, std::size_t max_item_size) noexcept {
  return size > max_item_size ? make_error_code(error::invalid_argument) : error_code{};
}

}  // namespace dlock::zk::detail
