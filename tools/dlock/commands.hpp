// dlock's subcommands. Each takes the arguments after its name, returns the
// exit status (see exit_status.hpp) and throws usage_error for bad arguments.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dlock::cli {

struct subcommand {
  std::string_view name;
  std::string_view usage;   ///< one line, without "Usage: "
  std::string_view summary;
  int (*run)(const std::vector<std::string>& args);
};

int lock_command(const std::vector<std::string>& args);
int elect_command(const std::vector<std::string>& args);
int leader_command(const std::vector<std::string>& args);
int queue_command(const std::vector<std::string>& args);

inline constexpr subcommand subcommands[] = {
    {"lock",
     "dlock lock (--zk HOSTS PATH [--shared] | (--redis HOST:PORT[,HOST:PORT...] | --sentinel HOST:PORT[,...] --master-name NAME) KEY [--ttl D]) "
     "[--timeout D] [--connect-timeout D] [--grace D] [AUTH/TLS OPTIONS] -- CMD [ARGS...]",
     "run CMD while holding a ZooKeeper or Redis lock", &lock_command},
    {"elect", "dlock elect --zk HOSTS PATH [--id ID] [--timeout D] [--connect-timeout D] [--grace D] -- CMD [ARGS...]",
     "campaign for leadership, run CMD while leader", &elect_command},
    {"leader", "dlock leader --zk HOSTS PATH [--watch] [--connect-timeout D]", "print the current leader's id", &leader_command},
    {"queue", "dlock queue --zk HOSTS PATH (put DATA | take [--timeout D] | peek | size) [--connect-timeout D]",
     "use a ZooKeeper queue", &queue_command},
};

/// The entry for `name`, or nullptr.
const subcommand* find_subcommand(std::string_view name);

}  // namespace dlock::cli
