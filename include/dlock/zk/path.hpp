/// @file
/// ZooKeeper path rules, checked locally before anything is sent.
#pragma once

#include <dlock/config.hpp>

#include <cstddef>
#include <string_view>

namespace dlock::zk {

/// The longest path a recipe (lock, election, queue) accepts: 64 KiB (a
/// semaphore's, 7 bytes less: its own lock is at `<path>/locks`, its leases
/// at `<path>/leases`); a longer one fails its operations with
/// `dlock::error::invalid_argument`, nothing sent. ZooKeeper has no limit of
/// its own below its packet size (`jute.maxbuffer`, 1 MiB - 1 by default),
/// but a request over that makes the server drop the session's connection,
/// suspending every lock on it; with this bound (and
/// `max_identifier_size`), a recipe's requests, its children's paths
/// included, stay far below it. The client's own requests are not bounded
/// here: their size is the caller's to keep below the servers' limit.
inline constexpr std::size_t max_path_size = 64 * 1024;

/// Empty error_code if `path` is a valid ZooKeeper path, else
/// `dlock::error::invalid_argument`. Valid: starts with '/', no empty
/// component ("//"), no trailing '/' (except the root "/"), no NUL or other
/// control characters, no "." or ".." component, well-formed UTF-8 without
/// the characters the server refuses (C1 controls, characters beyond U+FFFF,
/// U+D800-U+F8FF, U+FFF0-U+FFFF: ZooKeeper's `PathUtils.validatePath`).
/// `sequential` allows the trailing '/' a sequential create may end with.
error_code validate_path(std::string_view path, bool sequential = false) noexcept;

/// Why `path` is invalid, for messages; empty when it is valid.
std::string_view path_problem(std::string_view path, bool sequential = false) noexcept;

}  // namespace dlock::zk
