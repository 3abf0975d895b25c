/// @file
/// Writes that check a fencing token: a holder whose lock expired while it
/// was paused is refused once a later holder has written.
#pragma once

#include <dlock/config.hpp>
#include <dlock/detail/initiation.hpp>
#include <dlock/error.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/reply.hpp>
#include <dlock/redis/script.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::redis {

/// The script for `fenced_eval`: `body` (Lua, using KEYS and ARGV as usual)
/// runs only when the fencing token passed to `fenced_eval` is at least the
/// highest one seen at its fence key, which it then records; else the
/// script answers the error that `fenced_eval` reports as
/// `dlock::error::stale_token`, and `body` does not run. Check and write are
/// one atomic step on the server. Build it once and reuse it.
script fenced_script(std::string_view body);

namespace detail {
void start_fenced_eval(connection& conn, const script& fenced, std::string fence_key, std::int64_t fencing_token,
                       std::vector<std::string> keys, std::vector<std::string> args,
                       asio::any_completion_handler<void(error_code, reply)> handler);
void start_fenced_set(connection& conn, std::string key, std::string value, std::int64_t fencing_token,
                      asio::any_completion_handler<void(error_code)> handler);
}  // namespace detail

/// Runs a `fenced_script` with `keys` and `args`, if `fencing_token` is at
/// least the highest token seen at `fence_key` (a key of its own, which
/// keeps that highest token; several resources guarded by one lock may
/// share it).
///
/// @par Handler signature
/// `void(error_code, reply)`: the body's answer.
/// @par Executor, Cancellation, Lifetime
/// As `connection::eval`.
/// @par Errors
/// `dlock::error::stale_token` (a higher token was seen: nothing written),
/// `dlock::error::invalid_argument` (empty `fence_key`, `fencing_token <= 0`;
/// at once, nothing sent), and those of `connection::eval`.
template <class Token = default_token>
auto fenced_eval(connection& conn, const script& fenced, std::string fence_key, std::int64_t fencing_token,
                 std::vector<std::string> keys, std::vector<std::string> args, Token&& token = {}) {
  return dlock::detail::async_initiate_on<Token, void(error_code, reply)>(conn,
      [&conn](auto handler, const script& s, std::string fence, std::int64_t t, std::vector<std::string> k,
              std::vector<std::string> a) {
        detail::start_fenced_eval(conn, s, std::move(fence), t, std::move(k), std::move(a), std::move(handler));
      },
      token, fenced, std::move(fence_key), fencing_token, std::move(keys), std::move(args));
}

/// `SET key value`, if `fencing_token` is at least the highest token a
/// fenced write to `key` has carried (kept at `<key>:fenced_by`).
///
/// @par Handler signature
/// `void(error_code)`.
/// @par Executor, Cancellation, Lifetime
/// As `connection::eval`.
/// @par Errors
/// `dlock::error::stale_token` (a later holder has written: nothing
/// written), `dlock::error::invalid_argument` (empty key,
/// `fencing_token <= 0`; at once, nothing sent), and those of `connection::eval`.
template <class Token = default_token>
auto fenced_set(connection& conn, std::string_view key, std::string_view value, std::int64_t fencing_token,
                Token&& token = {}) {
  return dlock::detail::async_initiate_on<Token, void(error_code)>(conn,
      [&conn](auto handler, std::string k, std::string v, std::int64_t t) {
        detail::start_fenced_set(conn, std::move(k), std::move(v), t, std::move(handler));
      },
      token, std::string(key), std::string(value), fencing_token);
}

}  // namespace dlock::redis
