// What the chaos program's modes share: the clock, the record file, options.
#pragma once

#include <chaos/checker.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace dlock::chaos {

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the machine.
nanos now_ns();

/// Appends records to a file, one write(2) per line, so a crash loses at
/// most the line being written and the file never holds half lines.
class recorder {
 public:
  recorder(const std::string& path, std::string backend, std::string worker);
  ~recorder();
  recorder(const recorder&) = delete;
  recorder& operator=(const recorder&) = delete;
  void write(const std::string& kind, const std::string& subject, std::vector<std::string> fields = {},
             nanos time = 0);
  const std::string& worker() const { return worker_; }

 private:
  int fd_ = -1;
  std::string backend_;
  std::string worker_;
};

/// "--name value" pairs after the mode.
using arguments = std::map<std::string, std::string>;
arguments parse_arguments(int argc, char** argv, int first);
std::string argument(const arguments& args, const std::string& name, const std::string& fallback = {});
std::string required_env(const char* name);

/// "h:p,h:p" -> ports, in order.
struct host_port {
  std::string host;
  std::uint16_t port = 0;
};
std::vector<host_port> parse_hosts(const std::string& list);

/// Recipes per backend, each run by `processes_per_recipe` worker processes.
std::vector<std::string> recipes_of(const std::string& backend);
constexpr int processes_per_recipe = 3;

/// Where a run keeps its locks: unique per run so reruns never meet old state.
std::string zk_root(const std::string& run_id);
std::string zk_path(const std::string& run_id, const std::string& recipe);
std::string redis_key(const std::string& run_id, const std::string& recipe);

int worker_main(const arguments& args);
int run_main(const arguments& args);
/// Reads every *.log record file under `dirs` and prints the figures; 0 when clean.
int check_main(const std::vector<std::string>& dirs);

}  // namespace dlock::chaos
