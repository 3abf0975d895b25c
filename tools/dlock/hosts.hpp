// The --redis address list: HOST:PORT[,HOST:PORT...].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::cli {

struct host_port {
  std::string host;
  std::uint16_t port = 0;
  friend bool operator==(const host_port&, const host_port&) = default;
};

/// Parses "HOST:PORT[,HOST:PORT...]"; an IPv6 host is written in brackets
/// ("[::1]:6379"). `std::nullopt` if any item lacks a host or a port in
/// 1..65535, names one server twice (see redis::detail::same_master), or the
/// list is empty.
std::optional<std::vector<host_port>> parse_host_list(std::string_view text);

}  // namespace dlock::cli
