#include "dlock/child_process.hpp"

#include <boost/asio/use_awaitable.hpp>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

namespace dlock::cli {
namespace {

std::set<int>& inherited_descriptors() {
  static std::set<int> descriptors;
  return descriptors;
}

std::set<int> open_descriptors() {
  std::set<int> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec))
    out.insert(std::atoi(entry.path().filename().c_str()));
  return out;
}

// CMD must not hold dlock's sockets: a ZooKeeper or Redis connection kept
// open by CMD after dlock exits would outlive the lock it served.
void keep_own_descriptors_from_child() {
  for (int fd : open_descriptors())
    if (fd > 2 && !inherited_descriptors().contains(fd)) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

std::vector<char*> null_terminated(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// The child starts with no signal blocked and the default action for the
// signals dlock handles (or a parent may have ignored): CMD behaves as if
// started by a shell, not with dlock's dispositions.
struct spawn_attributes {
  posix_spawnattr_t attr;
  spawn_attributes() {
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE, SIGQUIT}) sigaddset(&defaults, s);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  ~spawn_attributes() { posix_spawnattr_destroy(&attr); }
  spawn_attributes(const spawn_attributes&) = delete;
  spawn_attributes& operator=(const spawn_attributes&) = delete;
};

}  // namespace

void remember_inherited_descriptors() { inherited_descriptors() = open_descriptors(); }

child_process::child_process(asio::any_io_executor executor) : sigchld_(executor, SIGCHLD) {}

child_process::~child_process() {
  if (pid_ <= 0 || exited()) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
}

int child_process::start(const std::vector<std::string>& argv, const std::vector<std::string>& environment) {
  auto args = null_terminated(argv);
  auto env = null_terminated(environment);
  spawn_attributes attributes;
  keep_own_descriptors_from_child();
  pid_t pid = -1;
  int err = ::posix_spawnp(&pid, args[0], nullptr, &attributes.attr, args.data(), env.data());
  if (err == 0) pid_ = pid;
  return err;
}

void child_process::signal(int signo) noexcept {
  if (pid_ > 0 && !exited()) ::kill(pid_, signo);
}

bool child_process::try_reap() noexcept {
  if (exited()) return true;
  if (pid_ <= 0) return false;  // never started: there is nothing to wait for
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) wait_status_ = status;
  else if (r < 0 && errno != EINTR) wait_status_ = W_EXITCODE(125, 0);  // not our child any more: cannot happen
  return exited();
}

asio::awaitable<int> child_process::wait_for_exit() {
  // Signals of one kind merge while pending, and a SIGCHLD may predate this
  // wait: ask waitpid() each time rather than trusting the count.
  while (!try_reap()) co_await sigchld_.async_wait(asio::use_awaitable);
  co_return *wait_status_;
}

}  // namespace dlock::cli
