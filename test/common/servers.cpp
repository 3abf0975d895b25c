#include "common/servers.hpp"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cstdlib>
#include <sstream>
#include <unistd.h>

namespace dlock::test {
namespace {

std::string required_env(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value)
    BOOST_FAIL(std::string(name) + " is not set: start the servers with scripts/servers start "
               "and source $DLOCK_RUN_DIR/env (scripts/test does both)");
  return value;
}

endpoint parse_endpoint(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos) BOOST_FAIL("bad host:port '" + text + "'");
  return {text.substr(0, colon), static_cast<std::uint16_t>(std::stoi(text.substr(colon + 1)))};
}

int port_base() {
  const char* base = std::getenv("DLOCK_PORT_BASE");
  return base ? std::atoi(base) : 21000;
}

std::vector<endpoint> endpoints(const char* variable) {
  std::vector<endpoint> out;
  std::stringstream list(required_env(variable));
  for (std::string item; std::getline(list, item, ',');) out.push_back(parse_endpoint(item));
  return out;
}

}  // namespace

std::string zk_hosts() { return required_env("DLOCK_ZK_HOSTS"); }
std::string zk_ensemble() { return required_env("DLOCK_ZK_ENSEMBLE"); }

std::vector<endpoint> redis_masters() { return endpoints("DLOCK_REDIS_MASTERS"); }

std::vector<endpoint> sentinels() { return endpoints("DLOCK_SENTINELS"); }
std::vector<endpoint> sentinel_nodes() { return endpoints("DLOCK_SENTINEL_NODES"); }

std::string sentinel_master_name() { return required_env("DLOCK_SENTINEL_MASTER"); }

std::string sentinel_node_name(std::uint16_t port) { return "sredis" + std::to_string(port - port_base() - 50); }

std::string zk_member_name(std::uint16_t port) {
  return "zk" + std::to_string(port - port_base() - 10);
}

std::string redis_name(std::size_t index) { return "redis" + std::to_string(index + 1); }

void server_action(const std::string& action, const std::string& name) {
  std::string command = "\"" + required_env("DLOCK_SERVERS_SCRIPT") + "\" " + action + " " + name;
  int rc = std::system(command.c_str());
  if (rc != 0) BOOST_FAIL("'" + command + "' failed with status " + std::to_string(rc));
}

std::string unique_name(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

}  // namespace dlock::test
