// Node names and sequence order of the ZooKeeper recipes (see node_names.hpp).
#include "node_names.hpp"

#include <dlock/log.hpp>

#include "detail/random.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <random>

#include <pthread.h>

namespace dlock::zk::detail {
namespace {

struct marker {
  std::string_view text;
  lock_kind kind;
};
// "__rlock__" before "__lock__" is not needed for correctness (neither is a
// suffix of the other) but keeps the intent obvious.
constexpr std::array<marker, 5> markers{{
    {"-lock-", lock_kind::exclusive},
    {"__READ__", lock_kind::read},
    {"__WRIT__", lock_kind::write},
    {"__rlock__", lock_kind::read},
    {"__lock__", lock_kind::write},
}};

bool all_digits(std::string_view s) noexcept {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::int64_t to_number(std::string_view digits) noexcept {
  std::int64_t v = 0;
  for (char c : digits) v = v * 10 + (c - '0');
  return v;
}

}  // namespace

// Exactly what the server's "%010d" of a signed 32-bit counter can print.
std::optional<std::int32_t> parse_sequence(std::string_view s) noexcept {
  if (s.size() == 10 && all_digits(s)) {
    auto v = to_number(s);
    if (v > INT32_MAX) return std::nullopt;
    return static_cast<std::int32_t>(v);
  }
  if (s.size() == 10 && s[0] == '-' && all_digits(s.substr(1))) return static_cast<std::int32_t>(-to_number(s.substr(1)));
  if (s.size() == 11 && s[0] == '-' && s[1] != '0' && all_digits(s.substr(1))) {
    auto v = to_number(s.substr(1));
    if (v > std::int64_t{INT32_MAX} + 1) return std::nullopt;
    return static_cast<std::int32_t>(-v);
  }
  return std::nullopt;
}

std::string join_path(std::string_view parent, std::string_view child) {
  std::string out;
  out.reserve(parent.size() + 1 + child.size());
  out.append(parent).append("/").append(child);
  return out;
}

namespace {
// Bumped in every forked child: a child must not repeat its parent's (or a
// sibling's) GUIDs, or GUID recovery could take a twin's node for ours.
std::atomic<unsigned> fork_generation{0};
void on_fork_in_child() noexcept { fork_generation.fetch_add(1, std::memory_order_relaxed); }

std::mt19937_64 seeded_engine() {
  std::array<std::uint32_t, 8> seed{};
  dlock::detail::fill_random(seed.data(), sizeof seed);
  std::seed_seq sequence(seed.begin(), seed.end());
  return std::mt19937_64(sequence);
}
}  // namespace

// A GUID needs to be unique, not secret: a per-thread engine seeded from
// getrandom saves a system call per acquire. It is reseeded after fork().
std::string make_guid() {
  static const bool fork_hook = pthread_atfork(nullptr, nullptr, on_fork_in_child) == 0;
  (void)fork_hook;
  thread_local std::mt19937_64 engine = seeded_engine();
  thread_local unsigned generation = fork_generation.load(std::memory_order_relaxed);
  if (auto now = fork_generation.load(std::memory_order_relaxed); now != generation) {
    engine = seeded_engine();
    generation = now;
  }
  std::array<unsigned char, 16> bytes{};
  for (std::size_t i = 0; i < bytes.size(); i += 8) {
    auto word = engine();
    for (std::size_t j = 0; j < 8; ++j) bytes[i + j] = static_cast<unsigned char>(word >> (8 * j));
  }
  bytes[6] = static_cast<unsigned char>((bytes[6] & 0x0f) | 0x40);  // version 4
  bytes[8] = static_cast<unsigned char>((bytes[8] & 0x3f) | 0x80);  // RFC 4122 variant
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(hex[bytes[i] >> 4]);
    out.push_back(hex[bytes[i] & 0x0f]);
  }
  return out;
}

namespace {
// What each of a GUID's 36 places may hold: a hex digit, or a dash at 8, 13,
// 18 and 23. A table: every child of every listing is checked (16 contenders
// relist 16 names on each wake), and the branchy per-character test cost
// about 700 instructions a name.
constexpr std::array<bool, 256> hex_digits = [] {
  std::array<bool, 256> table{};
  for (char c : std::string_view("0123456789abcdefABCDEF")) table[static_cast<unsigned char>(c)] = true;
  return table;
}();
}  // namespace

bool is_guid(std::string_view text) noexcept {
  if (text.size() != 36 || text[8] != '-' || text[13] != '-' || text[18] != '-' || text[23] != '-') return false;
  auto all_hex = [text](std::size_t from, std::size_t to) {
    bool hex = true;
    for (std::size_t i = from; i < to; ++i) hex &= hex_digits[static_cast<unsigned char>(text[i])];
    return hex;
  };
  return all_hex(0, 8) && all_hex(9, 13) && all_hex(14, 18) && all_hex(19, 23) && all_hex(24, 36);
}

std::string node_prefix(lock_role role, std::string_view guid) {
  std::string_view name = role == lock_role::exclusive ? "lock-"
                          : role == lock_role::reader  ? "__READ__"
                                                       : "__WRIT__";
  std::string out;
  out.reserve(3 + guid.size() + 1 + name.size());
  out.append("_c_").append(guid).append("-").append(name);
  return out;
}

std::optional<lock_node> parse_node(std::string_view name) noexcept {
  lock_node node;
  node.name = name;
  if (name.starts_with("_c_") && name.size() > 40 && name[39] == '-' && is_guid(name.substr(3, 36)))
    node.guid = name.substr(3, 36);
  // A known marker right before the sequence settles the ambiguity of
  // "-lock-1500000000" (positive) against "-lock" followed by "-1500000000".
  for (std::size_t length : {std::size_t{10}, std::size_t{11}}) {
    for (const auto& m : markers) {
      if (name.size() < m.text.size() + length) continue;
      auto at = name.size() - length;
      if (name.substr(at - m.text.size(), m.text.size()) != m.text) continue;
      auto sequence = parse_sequence(name.substr(at));
      if (!sequence) continue;
      node.sequence = *sequence;
      node.kind = m.kind;
      return node;
    }
  }
  if (name.size() < 10) return std::nullopt;
  if (auto sequence = parse_sequence(name.substr(name.size() - 10))) {
    node.sequence = *sequence;
    node.kind = lock_kind::foreign;
    return node;
  }
  return std::nullopt;
}

std::vector<lock_node> sort_contenders(std::span<const std::string> children) {
  std::vector<lock_node> nodes;
  nodes.reserve(children.size());
  for (const auto& child : children) {
    if (auto node = parse_node(child)) {
      nodes.push_back(*node);
    } else if (dlock::detail::log_enabled(log_level::warning)) {
      dlock::detail::log(log_level::warning,
                         "zk lock: ignoring child without a sequence suffix: " + child);
    }
  }
  if (nodes.empty()) return nodes;
  // Offsets from any one live sequence order them correctly across the wrap,
  // as long as the live ones span less than 2^31 (always, in practice).
  auto reference = static_cast<std::uint32_t>(nodes.front().sequence);
  auto offset = [reference](const lock_node& n) {
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(n.sequence) - reference);
  };
  std::sort(nodes.begin(), nodes.end(),
            [&](const lock_node& a, const lock_node& b) { return offset(a) < offset(b); });
  return nodes;
}

std::optional<std::string_view> find_guid_child(std::string_view guid,
                                                std::span<const std::string> children) noexcept {
  for (const auto& child : children) {
    std::string_view name = child;
    if (name.size() > 3 + guid.size() && name.starts_with("_c_") && name.substr(3, guid.size()) == guid &&
        name[3 + guid.size()] == '-')
      return name;
  }
  return std::nullopt;
}

}  // namespace dlock::zk::detail
