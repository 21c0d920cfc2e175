// plugins/flashinfer/scoring.cc - see scoring.h.
#include "scoring.h"

namespace accelopt_fib_plugin {
namespace {

// Element-wise mean of equally long lists; empty when the lengths differ or there are none.
std::vector<double> MeanAcross(const std::vector<std::vector<double>>& lists) {
  const size_t n = lists.empty() ? 0 : lists.front().size();
  for (const auto& l : lists)
    if (l.size() != n) return {};
  std::vector<double> out(n, 0.0);
  for (const auto& l : lists)
    for (size_t k = 0; k < n; ++k) out[k] += l[k] / lists.size();
  return out;
}

std::vector<double> Numbers(const json& list) {
  std::vector<double> out;
  for (const auto& v : list.is_array() ? list : json::array())
    if (v.is_number()) out.push_back(v.get<double>());
  return out;
}

}  // namespace

std::map<std::string, Scored> ScoreResults(const json& results) {
  std::map<std::string, Scored> scored;
  for (const auto& r : results.is_array() ? results : json::array()) {
    if (!r.is_object()) continue;
    std::map<std::string, std::vector<double>> lat;
    std::map<std::string, std::vector<std::vector<double>>> trials, samples;
    std::map<std::string, std::string> status, logs;
    for (const auto& row : r.value("results", json::array())) {
      std::string name = row.value("solution", "");
      std::string s = row.value("status", "RUNTIME_ERROR");
      if (!status.count(name) || s != "PASSED") status[name] = status.count(name) && status[name] != "PASSED" ? status[name] : s;
      if (s != "PASSED") {
        if (!logs.count(name)) logs[name] = row.value("log", std::string());
        continue;
      }
      lat[name].push_back(row.value("latency_ms", 0.0));
      trials[name].push_back(Numbers(row.value("trial_latency_ms", json::array())));
      samples[name].push_back(Numbers(row.value("samples_ms", json::array())));
    }
    for (const auto& [name, s] : status) {
      Scored entry;
      entry.status = s;
      entry.log = logs.count(name) ? logs[name] : std::string();
      const auto& l = lat[name];
      for (double v : l) entry.latency_ms += v;
      if (!l.empty()) entry.latency_ms /= l.size();
      entry.trials_ms = MeanAcross(trials[name]);
      entry.samples_ms = MeanAcross(samples[name]);
      scored[name] = entry;
    }
  }
  return scored;
}

// The interval of `after` over `before` as record fields (accelopt/sdk/noise.hpp): speedup_ci
// (null when the noise is unknown) and noise: faster | slower | within | unmeasured.
accelopt::sdk::SpeedupInterval Compare(const std::pair<std::vector<double>, std::vector<double>>& repeats, double confidence,
                                       json& record, const std::string& prefix) {
  const auto& [before, after] = repeats;
  accelopt::sdk::SpeedupInterval interval;
  if (!before.empty() && !after.empty()) interval = accelopt::sdk::EstimateSpeedup(before, after, confidence);
  accelopt::sdk::AnnotateNoise(interval, record, prefix);
  return interval;
}

}  // namespace accelopt_fib_plugin
