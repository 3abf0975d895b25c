/// @file
/// ZooKeeper path rules, checked locally before anything is sent.
#pragma once

#include <dlock/config.hpp>

#include <string_view>

namespace dlock::zk {

/// Empty error_code if `path` is a valid ZooKeeper path, else
/// `dlock::error::invalid_argument`. Valid: starts with '/', no empty
/// component ("//"), no trailing '/' (except the root "/"), no NUL or other
/// control characters, no "." or ".." component.
/// `sequential` allows the trailing '/' a sequential create may end with.
error_code validate_path(std::string_view path, bool sequential = false) noexcept;

/// Why `path` is invalid, for messages; empty when it is valid.
std::string_view path_problem(std::string_view path, bool sequential = false) noexcept;

}  // namespace dlock::zk
