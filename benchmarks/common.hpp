// Shared by every benchmark program: timing, percentiles, CPU time, and the
// one-JSON-line-per-result output that benchmarks/run and RESULTS.md read.
#pragma once

#include <dlock/observer.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <vector>

namespace dlock::bench {

using clock = std::chrono::steady_clock;

/// Set during warm-up runs: recorder::print prints nothing.
inline bool quiet = false;

/// Process CPU time in microseconds: user, system, and their sum.
struct cpu_time {
  double user = 0, system = 0;
  double total() const { return user + system; }
};
inline cpu_time cpu_now() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto us = [](const timeval& tv) { return tv.tv_sec * 1e6 + tv.tv_usec; };
  return {us(ru.ru_utime), us(ru.ru_stime)};
}

/// The process's peak resident set size so far, in KiB (getrusage's
/// ru_maxrss): per process, so it includes whatever ran earlier in it.
inline long peak_rss_kb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/// Collects per-operation latencies and wall/CPU time for one scenario.
class recorder {
 public:
  void start() {
    latencies_us_.clear();
    wall_start_ = clock::now();
    cpu_start_ = cpu_now();
  }
  void stop() {
    seconds_ = std::chrono::duration<double>(clock::now() - wall_start_).count();
    auto now = cpu_now();
    cpu_used_ = {now.user - cpu_start_.user, now.system - cpu_start_.system};
  }
  void add_latency(clock::duration d) {
    latencies_us_.push_back(std::chrono::duration<double, std::micro>(d).count());
  }
  void add_latency_us(double us) { latencies_us_.push_back(us); }

  /// Prints {"bench":..,"impl":..,"ops":..,"seconds":..,"ops_per_s":..,"p50_us":..,
  /// "p99_us":..,"cpu_us_per_op":..,"user_us_per_op":..,"system_us_per_op":..,"peak_rss_kb":..,
  /// plus `extra` (already-formatted "key":value pairs)}.
  void print(const std::string& bench, const std::string& impl, std::uint64_t ops,
             const std::string& extra = "") {
    if (quiet) return;
    std::sort(latencies_us_.begin(), latencies_us_.end());
    std::ostringstream out;
    out.setf(std::ios::fixed);
    out.precision(3);
    out << "{\"bench\":\"" << bench << "\",\"impl\":\"" << impl << "\",\"ops\":" << ops
        << ",\"seconds\":" << seconds_ << ",\"ops_per_s\":" << (seconds_ > 0 ? ops / seconds_ : 0)
        << ",\"p50_us\":" << percentile(0.50) << ",\"p99_us\":" << percentile(0.99)
        << ",\"cpu_us_per_op\":" << per_op(cpu_used_.total(), ops) << ",\"user_us_per_op\":"
        << per_op(cpu_used_.user, ops) << ",\"system_us_per_op\":" << per_op(cpu_used_.system, ops)
        << ",\"peak_rss_kb\":" << peak_rss_kb();
    if (!extra.empty()) out << "," << extra;
    out << "}\n";
    std::fputs(out.str().c_str(), stdout);
    std::fflush(stdout);
  }

  double percentile(double q) const {
    if (latencies_us_.empty()) return 0;
    auto index = static_cast<std::size_t>(q * static_cast<double>(latencies_us_.size() - 1) + 0.5);
    return latencies_us_[std::min(index, latencies_us_.size() - 1)];
  }

 private:
  static double per_op(double us, std::uint64_t ops) { return ops ? us / static_cast<double>(ops) : 0; }

  std::vector<double> latencies_us_;
  clock::time_point wall_start_{};
  cpu_time cpu_start_{};
  double seconds_ = 0;
  cpu_time cpu_used_{};
};

/// An environment variable, or `fallback` when unset.
inline std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

/// Whether to run `impl`'s side of `bench`. For profiling one side alone:
/// DLOCK_BENCH_IMPL=raw|dlock and DLOCK_BENCH_ONLY=<scenario>[,<scenario>...]
/// narrow the run; unset, everything runs.
inline bool wanted(const std::string& bench, const std::string& impl) {
  auto only_impl = env_or("DLOCK_BENCH_IMPL", "");
  auto only_bench = "," + env_or("DLOCK_BENCH_ONLY", "") + ",";
  return (only_impl.empty() || only_impl == impl) &&
         (only_bench == ",," || only_bench.find("," + bench + ",") != std::string::npos);
}

/// The dlock side of each scenario runs twice: as "dlock", and as
/// "dlock_observed" with an observer installed that does nothing (the cost of
/// the hooks themselves). DLOCK_BENCH_OBSERVED=0 runs the first only.
struct noop_observer final : dlock::observer {};

inline std::string& current_dlock_impl() {
  static std::string impl = "dlock";
  return impl;
}
/// The dlock side running now: "dlock" or "dlock_observed".
inline const std::string& dlock_impl() { return current_dlock_impl(); }
/// What that side installs in its client's or connection's options.
inline std::shared_ptr<dlock::observer> dlock_observer() {
  return dlock_impl() == "dlock_observed" ? std::make_shared<noop_observer>() : nullptr;
}
/// Runs `side()` as dlock side `impl` ("dlock", or "dlock_observed" unless
/// DLOCK_BENCH_OBSERVED=0).
template <class Side>
void as_dlock_impl(const char* impl, Side side) {
  if (std::string(impl) == "dlock_observed" && env_or("DLOCK_BENCH_OBSERVED", "1") == "0") return;
  current_dlock_impl() = impl;
  side();
  current_dlock_impl() = "dlock";
}
/// Runs `side()` once as each dlock side, in turn.
template <class Side>
void each_dlock_impl(Side side) {
  for (const char* impl : {"dlock", "dlock_observed"}) as_dlock_impl(impl, side);
}
/// Round `round` of an alternating comparison of raw, dlock and
/// dlock_observed: in that order in even rounds, in the reverse order in odd
/// ones. Over each pair of rounds every side runs as often before each other
/// side as after it, so a drift of the host's load, or the place in a round,
/// favours none of them (the A/A control, raw against raw, is balanced too).
template <class Raw, class Dlock>
void alternating_round(int round, Raw raw, Dlock dlock) {
  if (round % 2 == 0) {
    raw();
    as_dlock_impl("dlock", dlock);
    as_dlock_impl("dlock_observed", dlock);
  } else {
    as_dlock_impl("dlock_observed", dlock);
    as_dlock_impl("dlock", dlock);
    raw();
  }
}

/// `n` times DLOCK_BENCH_SCALE (default 1): longer runs for a profiler, where
/// process start-up would otherwise outweigh the scenario.
inline int scaled(int n) {
  int factor = std::atoi(env_or("DLOCK_BENCH_SCALE", "1").c_str());
  return n * (factor > 0 ? factor : 1);
}

}  // namespace dlock::bench
