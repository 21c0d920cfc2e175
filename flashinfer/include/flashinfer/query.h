// flashinfer/query.h - FIB's trace queries and scores (flashinfer-facts §1.6) and
// AccelOpt's selection of workloads and baselines (flashinfer-facts §3.2).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "flashinfer/trace_set.h"

namespace accelopt::fib {

/// FIB's filter_traces: PASSED and max_abs <= atol and max_rel <= rtol
/// (stricter than the pass rule: max_rel is often huge on passing traces).
bool WithinBounds(const Trace& trace, double atol = 1e-2, double rtol = 1e-2);

/// FIB's get_best_trace: among `traces` of `definition` (optionally only
/// those whose workload axes equal `axes`), PASSED and within bounds, the
/// highest speedup_factor. nullptr when none qualifies.
const Trace* BestTrace(const std::vector<const Trace*>& traces, const std::string& definition,
                       const Named<int64_t>* axes = nullptr, double atol = 1e-2, double rtol = 1e-2);

/// FIB's get_solution_score against the `baseline` author: per workload
/// uuid the best (lowest) PASSED latency of the baseline and of the
/// solution, their ratio baseline/solution, averaged over the workloads both
/// cover; 0 when any of the solution's traces failed or none is shared.
/// `solution_author` maps solution names to authors. Returns per solution
/// name; `error` says why there is no score (no or several baseline
/// solutions: FIB raises).
std::map<std::string, double> SolutionScores(const std::vector<const Trace*>& traces,
                                             const std::map<std::string, std::string>& solution_author,
                                             std::string* error);

/// AccelOpt's pick for one definition: the heavy workload and the best
/// baseline trace on it.
struct AccelOptPick {
  std::string definition, workload_uuid, solution;
  double workload_latency_ms = 0;  ///< the latency the workload was ranked by
  double speedup_factor = 0;
  double latency_ms = 0;  ///< the picked trace's latency
};

/// §3.2 steps 1-3: map each workload to the latency of the first trace with
/// a performance record; sort; take the first above `min_latency_ms` (10),
/// else the slowest; on it, the PASSED trace whose solution's language is
/// `language` with the largest speedup_factor. nullopt when none.
std::optional<AccelOptPick> AccelOptSelect(const TraceSet& set, const std::string& definition,
                                           const std::string& language = "triton", double min_latency_ms = 10.0);

/// §3.2 step 4: group picks by AccelOpt's definition-name prefixes and keep
/// the largest latency per group (a definition that matches no prefix forms
/// its own group; AccelOpt put it in the previous definition's group).
std::vector<AccelOptPick> AccelOptGroups(const std::vector<AccelOptPick>& picks);

/// AccelOpt's group prefixes, in matching order.
const std::vector<std::string>& AccelOptPrefixes();

}  // namespace accelopt::fib
