#include "redis/connection/sentinel.hpp"

#include <charconv>

namespace dlock::redis::detail {
namespace {

std::optional<std::uint16_t> port_of(std::string_view text) {
  std::uint16_t port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || end != text.data() + text.size() || port == 0) return std::nullopt;
  return port;
}

// The next space-separated word of `text`, consumed.
std::string_view next_word(std::string_view& text) {
  auto end = text.find(' ');
  auto word = text.substr(0, end);
  text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
  return word;
}

// The value of `field:` on a line of INFO's text, or empty.
std::string_view info_field(std::string_view info, std::string_view field) {
  for (std::size_t at = 0; at < info.size();) {
    auto end = info.find('\n', at);
    auto line = info.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > field.size() && line.substr(0, field.size()) == field && line[field.size()] == ':')
      return line.substr(field.size() + 1);
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return {};
}

}  // namespace

command master_query(std::string_view name) { return command{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", name}; }

command switch_subscription() { return command{"SUBSCRIBE", "+switch-master"}; }

std::optional<server_address> master_address(const reply& answer) {
  if (!answer.is_array() || answer.elements().size() != 2) return std::nullopt;
  const auto& host = answer.elements()[0];
  const auto& port = answer.elements()[1];
  if (!host.is_bulk() || host.string().empty() || !port.is_bulk()) return std::nullopt;
  auto number = port_of(port.string());
  if (!number) return std::nullopt;
  return server_address{std::string(host.string()), *number};
}

bool is_message(const reply& r) noexcept {
  if (!r.is_array() || r.elements().size() != 3) return false;
  const auto& head = r.elements()[0];
  return head.is_bulk() && head.string() == "message";
}

std::optional<server_address> switched_master(const reply& message, std::string_view name) {
  if (!is_message(message) || message.elements()[1].string() != "+switch-master") return std::nullopt;
  std::string_view payload = message.elements()[2].string();
  if (next_word(payload) != name) return std::nullopt;
  next_word(payload);  // the old address
  next_word(payload);
  auto host = next_word(payload);
  auto port = port_of(next_word(payload));
  if (host.empty() || !port || !payload.empty()) return std::nullopt;
  return server_address{std::string(host), *port};
}

replication_role replication_of(std::string_view info) {
  return {info_field(info, "role") == "master", std::string(info_field(info, "master_replid"))};
}

}  // namespace dlock::redis::detail
