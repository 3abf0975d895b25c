// Fault injection at every step, in the manner of Boost.MySQL's
// check_network_errors: run a scenario once without a fault to count its
// steps (the requests or commands its proxy forwarded), then once per step k
// with each kind of fault at step k, each run on fresh objects, checking the
// invariants after each run (the scenario does the checking, under a
// BOOST_TEST_CONTEXT naming the recipe, the step and the fault, so a failure
// says exactly which run broke what).
#pragma once

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace dlock::test {

/// What a fault run reports back.
enum class step_outcome {
  fired,        ///< the fault was injected at step k
  not_reached,  ///< the run did not get to step k (it took fewer steps this time)
};

/// Which fault kinds run at step k of a recipe. `all` runs every kind at every
/// step; a sampler trims the slow kinds deterministically (for example: the
/// kinds whose index matches k modulo some stride), so that every step still
/// meets every kind across the recipes.
using fault_sampler = std::function<bool(int step, std::size_t kind)>;
inline bool all_faults(int, std::size_t) { return true; }

struct step_report {
  int steps = 0;
  int runs = 0;
  int not_reached = 0;
};

/// `count_run()` runs the scenario without a fault and returns its step count;
/// `fault_run(k, kind)` runs it with fault `kind` (an index into `kinds`) at
/// step k (1-based) and checks the invariants.
inline step_report for_each_step(const std::string& recipe, const std::vector<std::string>& kinds,
                                 const std::function<int()>& count_run,
                                 const std::function<step_outcome(int, std::size_t)>& fault_run,
                                 const fault_sampler& sample = all_faults) {
  step_report report;
  {
    BOOST_TEST_CONTEXT(recipe << ": the run without a fault") report.steps = count_run();
  }
  BOOST_TEST_REQUIRE(report.steps > 0, recipe << ": the scenario took no step through the proxy");
  for (int k = 1; k <= report.steps; ++k) {
    for (std::size_t kind = 0; kind < kinds.size(); ++kind) {
      if (!sample(k, kind)) continue;
      BOOST_TEST_CONTEXT(recipe << ", step " << k << " of " << report.steps << ", fault " << kinds[kind]) {
        ++report.runs;
        auto start = std::chrono::steady_clock::now();
        auto outcome = fault_run(k, kind);
        BOOST_TEST_MESSAGE(recipe << ", step " << k << ", fault " << kinds[kind] << ": "
                                  << std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - start).count() << " ms");
        if (outcome == step_outcome::not_reached) {
          ++report.not_reached;
          BOOST_TEST_MESSAGE(recipe << ": step " << k << " not reached with fault " << kinds[kind]);
        }
      }
    }
  }
  BOOST_TEST_MESSAGE(recipe << ": " << report.steps << " steps, " << report.runs << " fault runs ("
                            << report.not_reached << " did not reach their step)");
  // A fault that never fires proves nothing: most runs must reach their step.
  BOOST_TEST(report.not_reached * 4 <= report.runs, recipe << ": too many runs never reached their step");
  return report;
}

}  // namespace dlock::test
