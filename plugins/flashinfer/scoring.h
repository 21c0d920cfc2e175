// plugins/flashinfer/scoring.h - fib_evaluate's rows as one figure per solution
// (status, mean latency over the workloads, repeats), and the speedup between
// two records with its noise (accelopt/sdk/noise.hpp), for fib_score (the records
// every loop over FIB definitions reads: beam, graph search, agent).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "accelopt/plugin_sdk.hpp"
#include "accelopt/sdk/noise.hpp"

namespace accelopt_fib_plugin {

using nlohmann::json;

/// One evaluated solution: its status (PASSED when every workload passed, else the first
/// failure's), its mean latency over the workloads, and its repeats: per trial the mean over
/// the workloads of that trial's median (`trials_ms`), and per timed call the mean over the
/// workloads of that call (`samples_ms`, the noise estimate's data); either is empty when
/// the workloads ran different numbers of them. `log`: the first failure's log.
struct Scored {
  std::string status;
  double latency_ms = 0;
  std::vector<double> trials_ms, samples_ms;
  std::string log;
};

/// Solution name -> Scored, from fib_evaluate outputs (a list of them, or the for_each's outputs).
std::map<std::string, Scored> ScoreResults(const json& results);

/// The interval of `after` over `before` (the repeats of accelopt::sdk::Repeats), written into
/// `record` as `<prefix>speedup_ci` and `<prefix>noise`.
accelopt::sdk::SpeedupInterval Compare(const std::pair<std::vector<double>, std::vector<double>>& repeats, double confidence,
                                       json& record, const std::string& prefix);

}  // namespace accelopt_fib_plugin
