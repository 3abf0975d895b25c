// Which commands a shared, pipelined connection refuses: those Redis does not
// answer with exactly one reply, and those that change the protocol or the
// connection's greeting under the other callers' feet. I/O-free.
#pragma once

#include <charconv>
#include <cstddef>
#include <optional>
#include <string_view>

namespace dlock::redis::detail {

/// The bulk string at `pos` of an encoded command ("$<len>\r\n<bytes>\r\n"),
/// with `pos` moved past it; nullopt at the end or on malformed input.
inline std::optional<std::string_view> next_argument(std::string_view wire, std::size_t& pos) {
  if (pos >= wire.size() || wire[pos] != '$') return std::nullopt;
  std::size_t length = 0;
  auto [end, ec] = std::from_chars(wire.data() + pos + 1, wire.data() + wire.size(), length);
  std::size_t start = static_cast<std::size_t>(end - wire.data()) + 2;  // past "\r\n"
  if (ec != std::errc() || start + length > wire.size()) return std::nullopt;
  pos = start + length + 2;
  return wire.substr(start, length);
}

/// `arg` equals `upper` (an upper-case ASCII name) ignoring ASCII case.
inline bool is_named(std::string_view arg, std::string_view upper) noexcept {
  if (arg.size() != upper.size()) return false;
  for (std::size_t i = 0; i < arg.size(); ++i) {
    char c = arg[i];
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (c != upper[i]) return false;
  }
  return true;
}

/// True for an encoded command (RESP array, as `command` makes) that a
/// shared connection must not send, because replies are matched to commands
/// one for one:
///   - empty (`*0`): Redis skips it without a reply;
///   - SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE and their UNSUBSCRIBE forms: one
///     reply per channel, then a stream of messages;
///   - MONITOR, SYNC, PSYNC: a stream; REPLCONF (ACK has no reply);
///   - CLIENT REPLY: OFF and SKIP silence the replies that follow;
///   - HELLO with a protocol other than 2: RESP3 replies;
///   - RESET: leaves the database, user and name the greeting set;
///   - SELECT: moves every lock on the connection to another database until
///     the next reconnect, whose greeting selects `options::database` again:
///     a lock taken in one would be released in the other, and holders in
///     the two databases never see each other;
///   - MULTI: every other caller's command would be answered "QUEUED" and
///     run at EXEC (use a script for atomic groups).
/// QUIT is allowed: one reply, then the server closes and the connection
/// reconnects; commands sent behind it fail with connection_lost.
/// Cheap: looks at the name's length first, and only at the first argument
/// of CLIENT and HELLO.
inline bool refused_command(std::string_view wire) noexcept {
  std::size_t pos = wire.find("\r\n");
  if (pos == std::string_view::npos || wire.substr(0, pos) == "*0") return true;
  pos += 2;
  auto name = next_argument(wire, pos);
  if (!name) return true;
  auto first_is = [&](std::string_view upper) {
    auto first = next_argument(wire, pos);
    return first && is_named(*first, upper);
  };
  switch (name->size()) {
    case 4: return is_named(*name, "SYNC");
    case 5:
      if (is_named(*name, "HELLO")) {
        auto protocol = next_argument(wire, pos);
        return protocol && *protocol != "2";
      }
      return is_named(*name, "PSYNC") || is_named(*name, "RESET") || is_named(*name, "MULTI");
    case 6: return is_named(*name, "SELECT") || (is_named(*name, "CLIENT") && first_is("REPLY"));
    case 7: return is_named(*name, "MONITOR");
    case 8: return is_named(*name, "REPLCONF");
    case 9: return is_named(*name, "SUBSCRIBE");
    case 10: return is_named(*name, "PSUBSCRIBE") || is_named(*name, "SSUBSCRIBE");
    case 11: return is_named(*name, "UNSUBSCRIBE");
    case 12: return is_named(*name, "PUNSUBSCRIBE") || is_named(*name, "SUNSUBSCRIBE");
    default: return false;
  }
}

}  // namespace dlock::redis::detail
