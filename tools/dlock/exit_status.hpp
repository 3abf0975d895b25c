// dlock's exit statuses: the one place they are defined.
//
//   status   meaning
//   CMD's    lock, elect: CMD exited normally; its own status is passed through
//   128+N    CMD was killed by signal N (as shells report it); also when dlock
//            gets signal N (SIGINT, SIGTERM, SIGHUP) before CMD started
//   1        queue peek: the queue is empty (nothing printed); leader: no leader
//   2        usage error: bad arguments (one line on stderr)
//   121      the lock (or leadership) was lost while CMD ran
//   124      not acquired within --timeout; queue take: nothing arrived within --timeout
//   125      dlock itself failed (cannot connect, backend error)
//   126      CMD could not be executed
//   127      CMD not found
#pragma once

#include <string_view>

namespace dlock::cli::exit_status {

inline constexpr int success = 0;
inline constexpr int empty = 1;
inline constexpr int usage = 2;
inline constexpr int lost = 121;
inline constexpr int timed_out = 124;
inline constexpr int failed = 125;
inline constexpr int cannot_execute = 126;
inline constexpr int not_found = 127;

/// The status a shell would report for a child's waitpid() status.
int from_wait_status(int wait_status) noexcept;
/// The status for a CMD that could not be started (`err`: posix_spawnp's errno).
int from_spawn_error(int err) noexcept;
/// The status to exit with for a CMD run under a lock: 121 if the lock was
/// lost while CMD ran, else CMD's own.
int for_supervised(bool lock_lost, int wait_status) noexcept;
/// When dlock is stopped by signal `signo` before CMD started: 128 + signo.
int for_signal(int signo) noexcept;

/// The table above, for --help.
std::string_view help_text() noexcept;

}  // namespace dlock::cli::exit_status
