// accelopt/sdk/noise.hpp - speedups between candidate records, judged against
// their measured noise (docs/optimize.md, "Noise-aware speedups"). Every loop
// that keeps a best (fib_select, mcgs_backprop, agent_step) asks here, so a
// CPU timing's jitter never becomes a speedup in any of them.
//
// A record's repeats, under a prefix ("", "parent_", "baseline_"):
//   <prefix>trials_ms   each trial's median (ms; trials are independent runs on
//                       fresh inputs)
//   <prefix>samples_ms  every timed call (ms; the mean over the workloads per call)
// The trials are the noise unit when both sides have three or more: a shift
// between whole runs (another process, a frequency step) is the noise a speedup
// must beat, and the calls of one trial share the machine's state, so their
// spread understates it (the same kernel timed twice came out "faster" by its
// calls). With fewer trials (df <= 2: no interval narrower than 4x) the timed
// calls, else whatever a side has. A record with neither field (the NKI emulator's deterministic
// estimate) is "deterministic": callers then keep their own rule (min_gain). A
// timed record with fewer than two repeats is "unmeasured" and wins nothing.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "accelopt/sdk/speedup.hpp"

namespace accelopt::sdk {

/// The positive numbers of the list `object[key]` (empty when absent or not a list).
inline std::vector<double> PositiveNumbers(const nlohmann::json& object, const std::string& key) {
  std::vector<double> out;
  if (!object.is_object() || !object.contains(key) || !object[key].is_array()) return out;
  for (const auto& v : object[key])
    if (v.is_number() && v.get<double>() > 0) out.push_back(v.get<double>());
  return out;
}

/// The repeats of `before` (fields under `before_prefix`) and `after` (under `after_prefix`):
/// the trials' medians when both sides have three or more, else the timed calls when both
/// have two or more, else the trials.
inline std::pair<std::vector<double>, std::vector<double>> Repeats(const nlohmann::json& before, const std::string& before_prefix,
                                                                   const nlohmann::json& after, const std::string& after_prefix) {
  auto bt = PositiveNumbers(before, before_prefix + "trials_ms"), at = PositiveNumbers(after, after_prefix + "trials_ms");
  if (bt.size() >= 3 && at.size() >= 3) return {bt, at};
  auto b = PositiveNumbers(before, before_prefix + "samples_ms"), a = PositiveNumbers(after, after_prefix + "samples_ms");
  if (b.size() >= 2 && a.size() >= 2) return {b, a};
  return {bt, at};
}

/// "faster" | "slower" | "within" | "unmeasured" for an interval.
inline std::string NoiseWord(const SpeedupInterval& interval) {
  if (!interval.measured) return "unmeasured";
  return interval.Faster() ? "faster" : interval.Slower() ? "slower" : "within";
}

/// The interval of `after` over `before` at `confidence`; unmeasured when a side has no repeats.
inline SpeedupInterval CompareRecords(const nlohmann::json& before, const std::string& before_prefix, const nlohmann::json& after,
                                      const std::string& after_prefix, double confidence) {
  const auto [b, a] = Repeats(before, before_prefix, after, after_prefix);
  if (b.empty() || a.empty()) return {};
  return EstimateSpeedup(b, a, confidence);
}

/// Writes the interval as record fields: `<prefix>speedup_ci` ([low, high], null when
/// unmeasured) and `<prefix>noise` (NoiseWord).
inline void AnnotateNoise(const SpeedupInterval& interval, nlohmann::json& record, const std::string& prefix) {
  record[prefix + "speedup_ci"] = interval.measured ? nlohmann::json::array({interval.low, interval.high}) : nlohmann::json(nullptr);
  record[prefix + "noise"] = NoiseWord(interval);
}

/// True when `record` carries no timing repeats at all (no samples_ms, no trials_ms): a
/// deterministic estimate such as the NKI emulator's.
inline bool Deterministic(const nlohmann::json& record) {
  return !record.is_object() || (!record.contains("samples_ms") && !record.contains("trials_ms"));
}

/// Whether `record` may replace `incumbent` as far as the noise goes: true when both are
/// deterministic (the caller's own threshold decides), else only when `record` is faster
/// beyond the interval (unmeasured: never). `why` gets the noise word when it may not.
inline bool BeyondNoise(const nlohmann::json& incumbent, const nlohmann::json& record, double confidence, std::string* why = nullptr) {
  if (Deterministic(incumbent) && Deterministic(record)) return true;
  const SpeedupInterval interval = CompareRecords(incumbent, "", record, "", confidence);
  if (interval.Faster()) return true;
  if (why) *why = NoiseWord(interval);
  return false;
}

}  // namespace accelopt::sdk
