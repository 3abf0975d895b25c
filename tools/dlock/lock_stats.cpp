#include "dlock/lock_stats.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace dlock::cli {
namespace {

double milliseconds_of(std::chrono::nanoseconds d) { return std::chrono::duration<double, std::milli>(d).count(); }

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

template <class T>
std::string or_null(const std::optional<T>& value) {
  if (!value) return "null";
  std::ostringstream out;
  if constexpr (std::is_same_v<T, std::chrono::milliseconds>) out << value->count();
  else out << *value;
  return out.str();
}

}  // namespace

void lock_stats::on_acquire_finished(const acquire_finished& e) noexcept {
  name_ = std::string(e.lock.name);
  kind_ = std::string(to_string(e.lock.kind));
  outcome_ = e.outcome ? e.outcome.message() : "ok";
  wait_ms_ = milliseconds_of(e.waited);
  attempts_ = e.attempts;
}

void lock_stats::on_hold_ended(const hold_ended& e) noexcept {
  held_ms_ = milliseconds_of(e.held_for);
  ended_ = e.how == hold_end::released ? "released" : "lost";
  reason_ = e.reason ? e.reason.message() : "";
}

void lock_stats::on_extended(const extended& e) noexcept {
  if (e.outcome) {
    ++failed_extensions_;
    return;
  }
  ++extensions_;
  min_validity_left_ = min_validity_left_ ? std::min(*min_validity_left_, e.validity_before) : e.validity_before;
  last_validity_ = e.validity_after;
}

std::string lock_stats::json() const {
  std::ostringstream out;
  out << "{\"name\":" << quoted(name_) << ",\"kind\":" << quoted(kind_)
      << ",\"outcome\":" << (outcome_ ? quoted(*outcome_) : "null") << ",\"wait_ms\":" << wait_ms_
      << ",\"attempts\":" << attempts_ << ",\"held_ms\":" << or_null(held_ms_)
      << ",\"ended\":" << (ended_.empty() ? "null" : quoted(ended_))
      << ",\"reason\":" << (reason_.empty() ? "null" : quoted(reason_)) << ",\"extensions\":" << extensions_
      << ",\"failed_extensions\":" << failed_extensions_
      << ",\"min_validity_left_ms\":" << or_null(min_validity_left_)
      << ",\"last_validity_ms\":" << or_null(last_validity_) << "}";
  return out.str();
}

}  // namespace dlock::cli
