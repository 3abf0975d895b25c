// CMD, run as a child process and reaped through SIGCHLD on the io_context.
#pragma once

#include <dlock/config.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/signal_set.hpp>

#include <optional>
#include <string>
#include <vector>
#include <sys/types.h>

namespace dlock::cli {

/// Notes the descriptors dlock was started with: only those are passed on to
/// CMD. The ones dlock opens itself (its server connections, opened by Asio
/// and the ZooKeeper C client without close-on-exec) are not. Call first thing in main().
void remember_inherited_descriptors();

/// Construct it before anything else can start a child: it listens for
/// SIGCHLD from construction on, so an exit is never missed.
class child_process {
 public:
  explicit child_process(asio::any_io_executor executor);
  ~child_process();  ///< a child still running is killed (SIGKILL) and reaped
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// Starts `argv` (looked up along PATH) with exactly `environment`.
  /// Returns 0, or posix_spawnp's errno (ENOENT: not found).
  int start(const std::vector<std::string>& argv, const std::vector<std::string>& environment);

  /// Sends `signo` to the child; nothing once it was reaped.
  void signal(int signo) noexcept;

  /// Completes with the child's waitpid() status once it has exited.
  asio::awaitable<int> wait_for_exit();

  bool exited() const noexcept { return wait_status_.has_value(); }

 private:
  bool try_reap() noexcept;

  asio::signal_set sigchld_;
  pid_t pid_ = -1;
  std::optional<int> wait_status_;
};

}  // namespace dlock::cli
