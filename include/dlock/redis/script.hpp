/// @file
/// A Lua script, run by EVAL the first time on a connection, then by EVALSHA.
#pragma once

#include <dlock/detail/require_cxx20.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace dlock::redis {

/// A Lua script and its SHA1, for `connection::eval`.
///
/// The SHA1 is computed locally when the script is built. A connection sends
/// the script's first use as EVAL, which also caches it on the server, and
/// later uses as EVALSHA: no SCRIPT LOAD round trip, and no NOSCRIPT retry
/// that could run it after commands issued later (see connection::eval).
/// Cheap to copy (shared, immutable).
class script {
 public:
  /// The script `source` (Lua); its SHA1 is computed here.
  explicit script(std::string source);

  /// The Lua source.
  const std::string& source() const noexcept { return data_->source; }
  /// 40 lowercase hex digits.
  const std::string& sha1() const noexcept { return data_->sha1; }

  /// What copies of a script share.
  struct data {
    std::string source;  ///< the Lua source
    std::string sha1;    ///< its SHA1, 40 lowercase hex digits
  };
  /// The shared source and SHA1 (what operations in flight keep alive).
  const std::shared_ptr<const data>& shared() const noexcept { return data_; }

 private:
  std::shared_ptr<const data> data_;
};

/// SHA1 of `bytes` as 40 lowercase hex digits.
std::string sha1_hex(std::string_view bytes);

}  // namespace dlock::redis
