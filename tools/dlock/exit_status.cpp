#include "dlock/exit_status.hpp"

#include <cerrno>
#include <sys/wait.h>

namespace dlock::cli::exit_status {

int from_wait_status(int wait_status) noexcept {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return for_signal(WTERMSIG(wait_status));
  return failed;  // stopped or continued: waitpid() was not asked to report those
}

int from_spawn_error(int err) noexcept {
  // ENOENT: no such file along PATH; anything else (EACCES, ENOEXEC, ...) was found but not run.
  return err == ENOENT ? not_found : cannot_execute;
}

int for_supervised(bool lock_lost, int wait_status) noexcept {
  return lock_lost ? lost : from_wait_status(wait_status);
}

int for_signal(int signo) noexcept { return 128 + signo; }

std::string_view help_text() noexcept {
  return "Exit status:\n"
         "  CMD's    CMD's own exit status (lock, elect)\n"
         "  128+N    CMD was killed by signal N (or dlock got signal N before CMD started)\n"
         "  1        queue peek: the queue is empty; leader: there is no leader\n"
         "  2        usage error\n"
         "  121      the lock (or leadership) was lost while CMD ran\n"
         "  124      not acquired within --timeout (queue take: nothing arrived)\n"
         "  125      dlock itself failed (cannot connect, backend error)\n"
         "  126      CMD could not be executed\n"
         "  127      CMD not found\n";
}

}  // namespace dlock::cli::exit_status
