// A Curator program from test/interop/ (NAME.java, run as a source file by
// `java`) in a process of its own, against the standalone ZooKeeper server:
// for the interop tests, where dlock and Curator share one recipe's nodes.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace dlock::test {

class curator_process {
 public:
  /// Starts `java test/interop/NAME.java ZK_HOSTS ARGS...`, its output to a file.
  curator_process(const std::string& name, const std::vector<std::string>& args);
  /// Kills it if it still runs (a failed test must not leave a JVM behind).
  ~curator_process();
  curator_process(const curator_process&) = delete;
  curator_process& operator=(const curator_process&) = delete;

  /// True once it has exited (never blocks); `status()` is then its exit status.
  bool finished();
  int status() const noexcept { return status_; }
  /// What it printed so far (stdout and stderr).
  std::string output() const;

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  std::string output_file_;
};

}  // namespace dlock::test
