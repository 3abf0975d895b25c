// dlock lock --stats: what the lock's observer saw, printed on exit as one
// JSON line (the wait, the hold, the extensions).
#pragma once

#include <dlock/observer.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace dlock::cli {

class lock_stats final : public dlock::observer {
 public:
  void on_acquire_finished(const acquire_finished& e) noexcept override;
  void on_hold_ended(const hold_ended& e) noexcept override;
  void on_extended(const extended& e) noexcept override;

  /// {"name":..,"kind":..,"outcome":..,"wait_ms":..,"attempts":..,"held_ms":..,"ended":..,
  ///  "reason":..,"extensions":..,"failed_extensions":..,"min_validity_left_ms":..,"last_validity_ms":..}
  /// with null for what did not happen (no hold, no extension).
  std::string json() const;

 private:
  std::string name_;
  std::string kind_;
  std::optional<std::string> outcome_;  // the last acquire's ("ok" or the error's message)
  double wait_ms_ = 0;
  std::uint32_t attempts_ = 0;
  std::optional<double> held_ms_;
  std::string ended_;  // "released", "lost", or "" while held
  std::string reason_;
  std::uint64_t extensions_ = 0, failed_extensions_ = 0;
  std::optional<std::chrono::milliseconds> min_validity_left_;  // before an extension was answered
  std::optional<std::chrono::milliseconds> last_validity_;      // after the last one
};

}  // namespace dlock::cli
