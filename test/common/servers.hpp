// Where the tests find the real servers, and how fault tests act on them.
// scripts/servers start exports the variables; anyone can point them elsewhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlock::test {

struct endpoint {
  std::string host;
  std::uint16_t port = 0;
};

/// DLOCK_ZK_HOSTS: the standalone ZooKeeper ("host:port").
std::string zk_hosts();
/// DLOCK_ZK_ENSEMBLE: the three ensemble members ("h:p,h:p,h:p").
std::string zk_ensemble();
/// DLOCK_REDIS_MASTERS: five independent redis masters.
std::vector<endpoint> redis_masters();

/// DLOCK_SENTINELS: the Sentinel set's three sentinels.
std::vector<endpoint> sentinels();
/// DLOCK_SENTINEL_NODES: the Sentinel set's three data nodes (one master, two replicas).
std::vector<endpoint> sentinel_nodes();
/// DLOCK_SENTINEL_MASTER: the name they monitor the master under.
std::string sentinel_master_name();
/// Name used by scripts/servers for the Sentinel set's data node on `port` ("sredis1".."sredis3").
std::string sentinel_node_name(std::uint16_t port);

/// Name used by scripts/servers for the ensemble member listening on `port`
/// ("zk1".."zk3"), or for the redis master at `index` ("redis1".."redis5").
std::string zk_member_name(std::uint16_t port);
std::string redis_name(std::size_t index);

/// Runs `$DLOCK_SERVERS_SCRIPT ACTION NAME` (kill, pause, resume, restart);
/// fails the test if the script fails.
void server_action(const std::string& action, const std::string& name);

/// A fresh name for this test run, so reruns never see old state: PREFIX-<pid>-<counter>.
std::string unique_name(const std::string& prefix);

}  // namespace dlock::test
