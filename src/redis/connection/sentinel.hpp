// What a connection reads from the sentinels and from its master, I/O-free:
// the address a sentinel names, a `+switch-master` message, a server's
// replication role; and which sentinel to ask next, with the error a
// discovery ends in when none names a master.
#pragma once

#include <dlock/redis/command.hpp>
#include <dlock/redis/error.hpp>
#include <dlock/redis/options.hpp>
#include <dlock/redis/reply.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace dlock::redis::detail {

/// The command that asks a sentinel for `name`'s master.
command master_query(std::string_view name);
/// The command that subscribes to the sentinels' failover announcements.
command switch_subscription();

/// The answer to SENTINEL GET-MASTER-ADDR-BY-NAME: the address, or none
/// (nil: the sentinel monitors no master by that name; anything else).
std::optional<server_address> master_address(const reply& answer);

/// A subscription's message (["message", channel, payload]): never the
/// answer of a command, so the connection hands it to its listener.
bool is_message(const reply& r) noexcept;

/// `+switch-master` says `name <old ip> <old port> <new ip> <new port>`:
/// the new master's address when it is about `name`.
std::optional<server_address> switched_master(const reply& message, std::string_view name);

/// What `INFO replication` says of the server.
struct replication_role {
  bool master = false;
  std::string replid;  // master_replid: the history its data follows
};
replication_role replication_of(std::string_view info);

/// One discovery: the sentinels asked in turn from `first`, each once; the
/// error it ends in when none named a master.
class sentinel_round {
 public:
  sentinel_round(std::size_t sentinels, std::size_t first) noexcept : count_(sentinels), next_(first % sentinels) {}
  /// The next sentinel to ask, or none when every one was.
  std::optional<std::size_t> next() noexcept {
    if (asked_ == count_) return std::nullopt;
    ++asked_;
    return std::exchange(next_, (next_ + 1) % count_);
  }
  /// A sentinel answered that it knows no master by the name.
  void answered_unknown() noexcept { unknown_ = true; }
  /// Why the round failed: some sentinel answered (`master_unknown`), or none did.
  error failure() const noexcept { return unknown_ ? error::master_unknown : error::sentinels_unreachable; }

 private:
  std::size_t count_;
  std::size_t next_;
  std::size_t asked_ = 0;
  bool unknown_ = false;
};

}  // namespace dlock::redis::detail
