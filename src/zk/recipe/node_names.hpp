// The names of the nodes the ZooKeeper recipes create, and their order:
// one place for the sequence suffix, shared by locks, election and queue.
//
// Lock and election nodes follow Apache Curator so JVM and C++ services can
// share a lock:
//   mutex   <path>/_c_<uuid>-lock-<seq>
//   reader  <path>/_c_<uuid>-__READ__<seq>
//   writer  <path>/_c_<uuid>-__WRIT__<seq>
// <uuid> is a random (v4) UUID, 36 lowercase characters with dashes: the GUID
// that finds our node again when a create's reply is lost. Queue items are
// "qn-<seq>". <seq> is the server's "%010d" of the parent's signed 32-bit
// child counter.
#pragma once

#include <dlock/config.hpp>
#include <dlock/zk/detail/lock_role.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::zk::detail {

/// What a contender node asks for, read from its name.
enum class lock_kind {
  exclusive,  ///< Curator "-lock-"
  read,       ///< Curator "__READ__", kazoo "__rlock__"
  write,      ///< Curator "__WRIT__", kazoo "__lock__"
  foreign,    ///< any other name ending in a sequence: treated as exclusive
};

/// One contender: views into the child name it was parsed from.
struct lock_node {
  std::string_view name;
  std::string_view guid;  ///< empty unless the name is protected ("_c_<uuid>-")
  lock_kind kind = lock_kind::foreign;
  std::int32_t sequence = 0;
};

/// A random UUID v4 from the system CSPRNG: lowercase, with dashes.
std::string make_guid();
bool is_guid(std::string_view text) noexcept;

/// "_c_<guid>-lock-" and friends: the name the server appends a sequence to.
std::string node_prefix(lock_role role, std::string_view guid);

/// A sequence suffix exactly as the server's "%010d" of a signed 32-bit
/// counter prints it ("0000000042", "-000000005", "-2147483648"); nullopt
/// for anything else.
std::optional<std::int32_t> parse_sequence(std::string_view digits) noexcept;

/// Parses a child name; nullopt when it has no sequence suffix.
std::optional<lock_node> parse_node(std::string_view name) noexcept;

/// True when `a` was created before `b`. The counter is a wrapping signed
/// 32-bit number, so compare by serial-number arithmetic, not by value: this
/// stays right across the wrap at 2^31 (where Curator's string compare does not).
inline bool sequence_before(std::int32_t a, std::int32_t b) noexcept {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) - static_cast<std::uint32_t>(b)) < 0;
}

/// Contenders in queue order (by sequence, never by prefix). Children with
/// no sequence suffix are left out with a log line. The result views `children`.
std::vector<lock_node> sort_contenders(std::span<const std::string> children);

/// The child whose name carries our GUID, if any (recovery after a lost create reply).
std::optional<std::string_view> find_guid_child(std::string_view guid,
                                                std::span<const std::string> children) noexcept;

/// "<parent>/<child>".
std::string join_path(std::string_view parent, std::string_view child);

}  // namespace dlock::zk::detail
