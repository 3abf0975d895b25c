#include "redis/locks/algorithm/options.hpp"

#include "redis/locks/algorithm/timing.hpp"

#include <dlock/error.hpp>
#include <dlock/limits.hpp>

#include <algorithm>
#include <string>

namespace dlock::redis::detail {

using std::chrono::milliseconds;

error_code invalid_lock_options(const lock_options& o) {
  // Beyond max_duration a deadline (now + duration, in nanoseconds) overflows.
  auto out_of_range = [](milliseconds d) { return d.count() < 0 || d > dlock::max_duration; };
  bool bad = out_of_range(o.wait) || out_of_range(o.retry_delay) || out_of_range(o.retry_jitter) ||
             out_of_range(o.drift_extra) || out_of_range(o.max_hold) ||
             !(o.drift_factor >= 0 && o.drift_factor < 1) || !(o.extend_fraction > 0 && o.extend_fraction < 1) ||
             !exceeds_drift(o.ttl, {o.drift_factor, o.drift_extra}) || o.replicas < 0 ||
             (o.replicas > 0 && (o.replica_timeout <= milliseconds::zero() || o.replica_timeout > dlock::max_duration));
  return bad ? make_error_code(dlock::error::invalid_argument) : error_code();
}

redlock_options engine_options(const lock_options& o) {
  redlock_options e;
  e.ttl = o.ttl;
  e.drift_factor = o.drift_factor;
  e.drift_extra = o.drift_extra;
  e.master_timeout = milliseconds::zero();
  e.retry_count = o.wait > milliseconds::zero() ? -1 : 0;
  e.retry_delay = o.retry_delay;
  e.retry_jitter = o.retry_jitter;
  e.wait_limit = o.wait;
  e.auto_extend = o.auto_extend;
  e.extend_fraction = o.extend_fraction;
  e.max_hold = o.max_hold;
  e.fencing = o.fencing;
  e.observer = o.observer;
  return e;
}

std::string redlock_masters_invalid(std::span<const options* const> masters) {
  for (const auto* master : masters)
    if (!master) return "redlock: a master is null";
  for (std::size_t i = 0; i < masters.size(); ++i)
    for (std::size_t j = 0; j < i; ++j) {
      const auto &a = *masters[i], &b = *masters[j];
      if (same_master(a.host, a.port, b.host, b.port))
        return "redlock: master " + a.host + ":" + std::to_string(a.port) + " is given twice";
    }
  return {};
}

bool extend_ttl_invalid(milliseconds ttl, milliseconds master_timeout) noexcept {
  bool timed = master_timeout > milliseconds::zero();
  return ttl <= milliseconds::zero() || ttl > dlock::max_duration || (timed && master_timeout >= ttl);
}

std::string_view redlock_invalid_reason(const redlock_options& options, std::size_t masters,
                                        std::string_view key) noexcept {
  if (masters == 0) return "redlock: at least one master is needed";
  if (key.empty()) return "redlock: the key must not be empty";
  if (options.ttl <= milliseconds::zero()) return "redlock: ttl must be positive";
  if (options.ttl > dlock::max_duration || options.wait_limit > dlock::max_duration ||
      options.retry_delay > dlock::max_duration || options.retry_jitter > dlock::max_duration ||
      options.max_hold > dlock::max_duration)
    return "redlock: durations must not exceed dlock::max_duration (100 years)";
  if (!(options.drift_factor >= 0.0 && options.drift_factor < 1.0))
    return "redlock: drift_factor must be in [0, 1)";
  if (options.drift_extra < milliseconds::zero() || options.drift_extra > dlock::max_duration)
    return "redlock: drift_extra must not be negative nor exceed dlock::max_duration";
  if (!exceeds_drift(options.ttl, {options.drift_factor, options.drift_extra}))
    return "redlock: ttl must be larger than its drift allowance (ttl * drift_factor + drift_extra)";
  if (options.master_timeout <= milliseconds::zero())
    return "redlock: master_timeout must be positive";
  if (options.master_timeout >= options.ttl)
    return "redlock: master_timeout must be smaller than ttl";
  if (options.retry_count < -1) return "redlock: retry_count must be -1 (unlimited) or more";
  if (options.retry_count == -1 && options.wait_limit <= milliseconds::zero())
    return "redlock: unlimited retries need a wait_limit";
  if (options.retry_delay < milliseconds::zero() || options.retry_jitter < milliseconds::zero())
    return "redlock: retry_delay and retry_jitter must not be negative";
  if (options.wait_limit < milliseconds::zero()) return "redlock: wait_limit must not be negative";
  if (options.auto_extend && !(options.extend_fraction > 0.0 && options.extend_fraction < 1.0))
    return "redlock: extend_fraction must be in (0, 1)";
  if (options.max_hold < milliseconds::zero()) return "redlock: max_hold must not be negative";
  return {};
}

namespace {
std::string_view canonical_host(std::string_view host) noexcept {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  constexpr std::string_view localhost = "localhost";
  bool is_localhost = host.size() == localhost.size() &&
                      std::equal(host.begin(), host.end(), localhost.begin(),
                                 [&](char a, char b) { return lower(a) == b; });
  return is_localhost ? std::string_view("127.0.0.1") : host;
}
}  // namespace

bool same_master(std::string_view host_a, unsigned port_a, std::string_view host_b, unsigned port_b) noexcept {
  if (port_a != port_b) return false;
  auto a = canonical_host(host_a), b = canonical_host(host_b);
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [&](char x, char y) { return lower(x) == lower(y); });
}

}  // namespace dlock::redis::detail
