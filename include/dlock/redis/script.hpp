// A Lua script run by EVALSHA, falling back to EVAL when the server lacks it.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace dlock::redis {

/// The SHA1 is computed locally when the script is built, so the first call
/// already uses EVALSHA and costs no extra round trip (no SCRIPT LOAD);
/// on NOSCRIPT (a new or flushed server) the connection resends it as EVAL,
/// which also caches it. Cheap to copy (shared, immutable).
class script {
 public:
  explicit script(std::string source);

  const std::string& source() const noexcept { return data_->source; }
  /// 40 lowercase hex digits.
  const std::string& sha1() const noexcept { return data_->sha1; }

  struct data {
    std::string source;
    std::string sha1;
  };
  const std::shared_ptr<const data>& shared() const noexcept { return data_; }

 private:
  std::shared_ptr<const data> data_;
};

/// SHA1 of `bytes` as 40 lowercase hex digits.
std::string sha1_hex(std::string_view bytes);

}  // namespace dlock::redis
