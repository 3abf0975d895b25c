/// @file
/// The log hook. dlock never prints; it hands messages to a function you set.
#pragma once

#include <dlock/detail/require_cxx20.hpp>

#include <functional>
#include <string_view>

namespace dlock {

/// How important a log message is, lowest first.
enum class log_level {
  debug,    ///< detail, for tracing a problem
  info,     ///< notable events: sessions, reconnections, recoveries
  warning,  ///< a problem dlock works around
  error,    ///< a failure: a handshake refused, a node that could not be deleted
};

/// Receives every log message from dlock (and from the ZooKeeper C client,
/// routed through it). Called on the thread that runs the io_context.
using log_handler = std::function<void(log_level, std::string_view)>;

/// Sets the process-wide handler and the lowest level passed to it.
/// With no handler set (the default), messages are discarded.
void set_log_handler(log_handler handler, log_level min_level = log_level::info);

/// A name for the level: "debug", "info", "warning", "error".
std::string_view to_string(log_level level) noexcept;

namespace detail {
bool log_enabled(log_level level) noexcept;
void log(log_level level, std::string_view message);
}  // namespace detail

}  // namespace dlock
