// Network partitions for the partition tests: iptables rules inside the
// network namespace scripts/partition-env made for the test program. Every
// server there listens on the namespace's 127.0.0.1, so a cut is a rule on
// ports (and, for the ZooKeeper members' outgoing connections, on the owner
// uid, DLOCK_ZK_UID_BASE + N). The rules DROP: a silent partition, no reset.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace dlock::test::partition {

/// `command`'s standard output (blocking: only for quick local commands).
inline std::string output_of(const std::string& command) {
  std::FILE* pipe = ::popen(command.c_str(), "r");
  BOOST_REQUIRE_MESSAGE(pipe, "cannot run " << command);
  std::string out;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, pipe)) out += buffer;
  ::pclose(pipe);
  return out;
}

/// Fails the test unless this process runs inside the namespace that
/// scripts/partition-env made for it: the rules below must never reach the
/// host's own tables (the binary run by hand, as root, outside the wrapper).
inline void require_own_namespace() {
  static bool checked = false;
  if (checked) return;
  const char* expected = std::getenv("DLOCK_PARTITION_NS");
  BOOST_REQUIRE_MESSAGE(expected && *expected,
                        "DLOCK_PARTITION_NS is not set: run this test through scripts/partition-env (ctest does)");
  auto here = output_of("ip netns identify 2>/dev/null");
  while (!here.empty() && here.back() == '\n') here.pop_back();
  BOOST_REQUIRE_MESSAGE(here == expected, "this process runs in network namespace '"
                                              << here << "', not in " << expected << ": refusing to touch iptables");
  checked = true;
}

inline void iptables(const std::string& rule) {
  require_own_namespace();
  std::string command = "iptables -w " + rule;
  int rc = std::system(command.c_str());
  BOOST_REQUIRE_MESSAGE(rc == 0, "'" << command << "' failed with status " << rc);
}

/// Every packet to or from `port` is dropped: whoever talks to the server
/// listening there hears nothing more, and nobody can connect to it.
inline void isolate_port(std::uint16_t port) {
  auto p = std::to_string(port);
  iptables("-A INPUT -p tcp --dport " + p + " -j DROP");
  iptables("-A INPUT -p tcp --sport " + p + " -j DROP");
}

/// Packets that processes running as `uid` send to any of `ports` are dropped
/// (connections they open there, and the ones they opened before).
inline void drop_sent_by(unsigned uid, const std::vector<std::uint16_t>& ports) {
  for (auto port : ports)
    iptables("-A OUTPUT -p tcp -m owner --uid-owner " + std::to_string(uid) + " --dport " + std::to_string(port) +
             " -j DROP");
}

/// Removes every cut.
inline void heal_all() {
  iptables("-F INPUT");
  iptables("-F OUTPUT");
}

/// Heals when the test leaves its scope, even after a failed check.
struct healer {
  healer() = default;
  healer(const healer&) = delete;
  healer& operator=(const healer&) = delete;
  ~healer() {
    try {
      heal_all();
    } catch (...) {
    }
  }
};

}  // namespace dlock::test::partition
