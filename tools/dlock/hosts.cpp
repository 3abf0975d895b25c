#include "dlock/hosts.hpp"

#include <dlock/redis/detail/redlock_options.hpp>

#include <charconv>

namespace dlock::cli {
namespace {

std::optional<std::uint16_t> parse_port(std::string_view text) noexcept {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535)
    return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

std::optional<host_port> parse_one(std::string_view item) {
  std::string_view host;
  std::string_view rest;
  if (item.starts_with('[')) {  // [v6 address]:port
    auto close = item.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = item.substr(1, close - 1);
    rest = item.substr(close + 1);
  } else {
    auto colon = item.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = item.substr(0, colon);
    rest = item.substr(colon);
  }
  if (host.empty() || !rest.starts_with(':')) return std::nullopt;
  auto port = parse_port(rest.substr(1));
  if (!port) return std::nullopt;
  return host_port{std::string(host), *port};
}

}  // namespace

std::optional<std::vector<host_port>> parse_host_list(std::string_view text) {
  std::vector<host_port> out;
  for (;;) {
    auto comma = text.find(',');
    auto item = parse_one(text.substr(0, comma));
    if (!item) return std::nullopt;
    for (const auto& seen : out)  // a Redlock master named twice would count twice
      if (redis::detail::same_master(seen.host, seen.port, item->host, item->port)) return std::nullopt;
    out.push_back(std::move(*item));
    if (comma == std::string_view::npos) return out;
    text.remove_prefix(comma + 1);
  }
}

}  // namespace dlock::cli
