// What the Redis locks' commands answer, and bad input, I/O-free.
#pragma once

#include <dlock/error.hpp>
#include <dlock/limits.hpp>
#include <dlock/redis/error.hpp>
#include <dlock/redis/reply.hpp>

#include "redis/resp/reply_parser.hpp"

#include <boost/asio/error.hpp>

#include <charconv>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <optional>
#include <system_error>
#include <string_view>

namespace dlock::redis::detail {

using std::chrono::milliseconds;

/// Bad input is refused before anything is sent. A TTL beyond
/// `max_duration` would overflow the deadlines kept beside it.
inline error_code validate(std::string_view key, milliseconds ttl) {
  if (key.empty() || ttl.count() <= 0 || ttl > dlock::max_duration) return dlock::error::invalid_argument;
  return {};
}

/// An integer's decimal text on the stack: a command's argument, no string built.
class decimal {
 public:
  template <std::integral Integer>
    requires(sizeof(Integer) <= 8)
  explicit decimal(Integer value) noexcept
      : size_(static_cast<std::size_t>(std::to_chars(digits_, digits_ + sizeof digits_, value).ptr - digits_)) {}
  operator std::string_view() const noexcept { return {digits_, size_}; }

 private:
  char digits_[20];  // INT64_MIN's and UINT64_MAX's 20
  std::size_t size_;
};

/// The script did not run on that master (NOSCRIPT): it may be sent again.
/// Tested on every answer, so the usual one, no error, costs one test.
inline bool script_did_not_run(error_code ec) noexcept {
  return ec && (ec == redis::error::script_not_run || ec == redis::error::no_script);
}

/// SET key token NX PX: OK acquired, nil held by someone else.
enum class set_outcome { acquired, taken, unexpected };
inline set_outcome interpret_set(const reply& r) {
  if (r.is_ok()) return set_outcome::acquired;
  if (r.is_nil()) return set_outcome::taken;
  return set_outcome::unexpected;
}

/// The fenced acquire's EXEC (hold_commands, attempt.cpp): [OK, counter] acquired,
/// [nil, counter] taken.
struct fenced_set_answer {
  set_outcome outcome = set_outcome::unexpected;
  std::int64_t fencing_token = 0;
};
inline fenced_set_answer interpret_fenced_exec(const reply& r) {
  const auto& items = r.elements();
  if (!r.is_array() || items.size() != 2 || !items[1].is_integer() || items[1].integer() <= 0) return {};
  auto outcome = interpret_set(items[0]);
  if (outcome != set_outcome::acquired) return {outcome, 0};
  return {outcome, items[1].integer()};
}

/// The fenced acquire's EXEC with an error inside ([OK, error]: the INCR of
/// a counter that holds no integer, or would overflow): that error.
inline error_code fenced_exec_error(const reply& r) {
  const auto& items = r.elements();
  for (const auto& item : items)
    if (item.is_error()) return classify_error(item.string());
  return {};
}

/// The semaphore's acquire script (scripts.hpp): 1 admitted, 0 all leases held.
inline set_outcome interpret_admit(const reply& r) {
  if (!r.is_integer()) return set_outcome::unexpected;
  if (r.integer() == 1) return set_outcome::acquired;
  if (r.integer() == 0) return set_outcome::taken;
  return set_outcome::unexpected;
}

/// A Redlock master's fenced acquire ({1 or 0, counter}; counter -1 when the
/// master has none).
struct redlock_fenced_answer {
  set_outcome outcome = set_outcome::unexpected;
  std::int64_t counter = -1;
};
/// An integer answered as such or as text (the fencing scripts answer
/// counters as text: through a Lua number they would be rounded above 2^53).
inline std::optional<std::int64_t> integer_value(const reply& r) {
  if (r.is_integer()) return r.integer();
  if (!r.is_bulk() && !r.is_status()) return std::nullopt;
  auto text = r.string();
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

inline redlock_fenced_answer interpret_redlock_fenced_set(const reply& r) {
  const auto& items = r.elements();
  if (!r.is_array() || items.size() != 2 || !items[0].is_integer()) return {};
  auto counter = integer_value(items[1]);
  if (!counter) return {};
  auto outcome = items[0].integer() == 1 ? set_outcome::acquired : set_outcome::taken;
  return {outcome, *counter};
}

/// An acquire whose SET may have been applied though we saw no reply: its
/// token is then deleted (compare-and-delete) so no stray key is left. A
/// protocol error fails commands that may have run.
inline bool set_outcome_unknown(error_code ec) {
  return ec == boost::asio::error::operation_aborted || ec == redis::error::timed_out ||
         ec == redis::error::connection_lost || ec == redis::error::protocol_error || ec == dlock::error::closed;
}

/// The compare-and-delete / compare-and-PEXPIRE scripts return 1 when our
/// token was there, 0 when not (expired or someone else's).
inline error_code interpret_compare_script(const reply& r) {
  if (r.is_integer() && r.integer() == 1) return {};
  if (r.is_integer() && r.integer() == 0) return dlock::error::not_owned;
  return redis::error::protocol_error;
}

}  // namespace dlock::redis::detail
