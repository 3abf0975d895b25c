// dlock_chaos: contenders under random faults, and the checker of what they did.
//
//   dlock_chaos run --backend zk|redis|sentinel --dir DIR [--seconds 60] [--seed N]
//       starts 3 worker processes per recipe of the backend, injects faults
//       into the servers named by the env of scripts/servers, stops the
//       workers, looks for orphans, then checks (as `check DIR`).
//   dlock_chaos check DIR...
//       reads every record file in DIR, prints one line of figures per
//       backend and the violations; exits 1 on any violation.
//   dlock_chaos worker ...   (started by `run`)
#include <chaos/support.hpp>

#include <exception>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  using namespace dlock::chaos;
  std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "worker") return worker_main(parse_arguments(argc, argv, 2));
    if (mode == "run") return run_main(parse_arguments(argc, argv, 2));
    if (mode == "check" && argc > 2) return check_main(std::vector<std::string>(argv + 2, argv + argc));
  } catch (const std::exception& e) {
    std::cerr << "dlock_chaos " << mode << ": " << e.what() << "\n";
    return 2;
  }
  std::cerr << "usage: dlock_chaos run --backend zk|redis|sentinel --dir DIR [--seconds 60] [--seed N]\n"
               "       dlock_chaos check DIR...\n";
  return 2;
}
