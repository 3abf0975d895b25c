// RESP2 parsing by hiredis's redisReader, building dlock::redis::reply
// values directly (our own object functions: no second conversion pass).
#pragma once

#include <dlock/redis/error.hpp>
#include <dlock/redis/reply.hpp>

#include <cstddef>

struct redisReader;

namespace dlock::redis::detail {

class reply_parser {
 public:
  reply_parser();
  ~reply_parser();
  reply_parser(const reply_parser&) = delete;
  reply_parser& operator=(const reply_parser&) = delete;

  void feed(const char* data, std::size_t size);
  enum class result { none, reply, protocol_error };
  /// The next complete reply, if any, into `out`.
  result next(reply& out);
  /// Forgets buffered bytes (after a reconnect).
  void reset();

 private:
  redisReader* reader_ = nullptr;
  reply top_;  // where the reader builds a top-level reply (see slot_of())
};

/// The redis::error for a server error reply ("NOSCRIPT ...", "WRONGPASS ...").
error classify_error(std::string_view message) noexcept;

}  // namespace dlock::redis::detail
