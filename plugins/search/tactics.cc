// Tactic statistics: which moves helped on which kernels, per rule and
// bottleneck of the kernel they were applied to (docs/search.md, "Tactic
// statistics"). Kept in the search state, written to tactics.json, loaded by
// a later search (vars.tactics) to weight its priors. Pure, like mcgs_core.cc
// (compiled into the tests as well).
#include <cmath>

#include "mcgs_core.h"

namespace accelopt_search {

json TacticEntry(const json& tactics, const std::string& rule, const std::string& bottleneck) {
  const json entries = tactics.value("entries", json::object());
  const std::string key = rule + "|" + bottleneck;
  return entries.is_object() && entries.contains(key) ? entries[key] : json();
}

void RecordTactic(json& tactics, const std::string& rule, const std::string& bottleneck, const std::string& problem,
                  bool ok, double speedup_vs_parent) {
  if (!tactics.is_object()) tactics = {{"version", 1}, {"entries", json::object()}};
  json& entry = tactics["entries"][rule + "|" + bottleneck];
  if (entry.is_null()) {
    entry = {{"rule", rule}, {"bottleneck", bottleneck}, {"n", 0}, {"improved", 0}, {"failed", 0},
             {"log_gain_sum", 0.0}, {"problems", json::object()}};
  }
  const bool improved = ok && speedup_vs_parent > 1.0;
  entry["n"] = entry["n"].get<int>() + 1;
  if (!ok) entry["failed"] = entry["failed"].get<int>() + 1;
  if (improved) entry["improved"] = entry["improved"].get<int>() + 1;
  if (ok && speedup_vs_parent > 0) entry["log_gain_sum"] = entry["log_gain_sum"].get<double>() + std::log(speedup_vs_parent);
  json& per = entry["problems"][problem.empty() ? "?" : problem];
  // A problem's own mean gain prunes its moves (docs/search.md, "priors"). An entry of a
  // tactics.json written before per-problem gains were kept has none and never predicts.
  if (per.is_null()) per = {{"n", 0}, {"improved", 0}, {"failed", 0}, {"log_gain_sum", 0.0}};
  per["n"] = per["n"].get<int>() + 1;
  if (!ok) per["failed"] = per["failed"].get<int>() + 1;
  if (improved) per["improved"] = per["improved"].get<int>() + 1;
  if (ok && speedup_vs_parent > 0 && per.contains("log_gain_sum")) per["log_gain_sum"] = per["log_gain_sum"].get<double>() + std::log(speedup_vs_parent);
}

}  // namespace accelopt_search
