#include "dlock/hold.hpp"

#include <cstring>

extern char** environ;

namespace dlock::cli {

int status_for(const acquire_outcome& outcome, const hold_settings& settings) {
  auto not_acquired = [&] {
    if (settings.timeout && settings.timeout->count() == 0)
      print_error("could not acquire " + settings.name + ": it is held (--timeout 0: one attempt)");
    else if (settings.timeout)
      print_error("could not acquire " + settings.name + " within " + std::to_string(settings.timeout->count()) + " ms");
    else
      print_error("could not acquire " + settings.name);
    return exit_status::timed_out;
  };
  switch (outcome.end) {
    case race_end::timeout: return not_acquired();
    case race_end::signal: return exit_status::for_signal(outcome.signo);
    case race_end::operation: break;
  }
  if (!outcome.error) return exit_status::success;
  if (outcome.error == dlock::error::taken || outcome.error == dlock::error::timed_out) return not_acquired();
  print_error("cannot acquire " + settings.name + ": " + outcome.error.message());
  return exit_status::failed;
}

int status_for(const wait_end& ended, const hold_settings& settings) {
  if (ended.failure) return status_for_exception(ended.failure);
  return status_for(acquire_outcome{ended.end, {}, ended.signo}, settings);
}

bool one_attempt(const hold_settings& settings) noexcept { return settings.timeout && settings.timeout->count() == 0; }

void arm_deadline(asio::steady_timer& deadline, const hold_settings& settings) {
  arm(deadline, one_attempt(settings) ? std::nullopt : settings.timeout);
}

int start_command(child_process& child, const hold_settings& settings, const std::vector<std::string>& variables) {
  int err = child.start(settings.command, child_environment(environ, variables));
  if (err == 0) return exit_status::success;
  print_error("cannot run " + settings.command.front() + ": " + std::strerror(err));
  return exit_status::from_spawn_error(err);
}

void report_release(error_code ec, bool lost) {
  if (ec && !lost) print_error("releasing the lock: " + ec.message());
}

}  // namespace dlock::cli
