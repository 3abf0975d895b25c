// The bare ZooKeeper C client in a minimal poll loop (the baseline for zk_client).
#include "zk_raw_loop.hpp"

int main() {
  dlock::bench::raw::run_all(dlock::bench::env_or("DLOCK_ZK_HOSTS", "127.0.0.1:2181"));
  return 0;
}
