// Running a subcommand's coroutine on one io_context, and dlock's own messages.
#pragma once

#include "dlock/exit_status.hpp"

#include <dlock/config.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>

#include <exception>
#include <memory>
#include <stdexcept>
#include <string_view>

namespace dlock::cli {

/// dlock itself failed (cannot connect, backend error): the message is
/// printed as "dlock: <what>" and dlock exits 125. So is any
/// boost::system::system_error escaping a subcommand.
struct failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Routes the library's log to stderr as "dlock: <message>": warnings and
/// errors, and with `verbose` everything down to debug.
void route_library_log(bool verbose);

/// Prints "dlock: <message>" on stderr.
void print_error(std::string_view message);

/// Keeps `object` (a ZooKeeper client, a Redis connection) alive until the
/// io_context has drained: work the library leaves running in the
/// background after a lock object is gone (a ZooKeeper lock's release retry
/// after a loss) still refers to its client.
void keep_until_drained(std::shared_ptr<void> object);
/// Destroys what keep_until_drained kept (before the io_context goes).
void destroy_kept_objects();

/// Prints why `failure_ptr` ended a subcommand; returns 125.
int status_for_exception(std::exception_ptr failure_ptr);

/// Runs `main(settings)` on a fresh io_context (the only thread) and returns
/// the status it produced, or 125 (after printing why) if it threw.
template <class Settings>
int run_to_exit_status(asio::awaitable<int> (*main)(Settings), Settings settings) {
  asio::io_context io;
  int status = exit_status::failed;
  bool done = false;
  asio::co_spawn(io, main(std::move(settings)), [&status, &done](std::exception_ptr e, int result) {
    status = e ? status_for_exception(e) : result;
    done = true;
  });
  while (!done && io.run_one() > 0) {
  }
  // Let closing connections and background releases (Redlock's slower
  // masters) finish, but never let them keep dlock alive for long.
  io.run_for(std::chrono::seconds(2));
  destroy_kept_objects();
  return status;
}

}  // namespace dlock::cli
