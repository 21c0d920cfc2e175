// flashinfer/src/query.cc - trace queries, scores and AccelOpt's selection (query.h).
#include "flashinfer/query.h"

#include <algorithm>
#include <limits>

namespace accelopt::fib {

bool WithinBounds(const Trace& trace, double atol, double rtol) {
  if (!trace.evaluation || trace.evaluation->status != "PASSED" || !trace.evaluation->correctness) return false;
  const auto& c = *trace.evaluation->correctness;
  return c.max_absolute_error <= atol && c.max_relative_error <= rtol;
}

const Trace* BestTrace(const std::vector<const Trace*>& traces, const std::string& definition,
                       const Named<int64_t>* axes, double atol, double rtol) {
  const Trace* best = nullptr;
  for (const Trace* t : traces) {
    if (t->definition != definition || !WithinBounds(*t, atol, rtol) || !t->evaluation->performance) continue;
    if (axes != nullptr) {
      if (t->workload.axes.size() != axes->size()) continue;
      bool same = true;
      for (const auto& [name, value] : *axes) {
        const int64_t* v = Find(t->workload.axes, name);
        same = same && v != nullptr && *v == value;
      }
      if (!same) continue;
    }
    if (best == nullptr ||
        t->evaluation->performance->speedup_factor > best->evaluation->performance->speedup_factor)
      best = t;
  }
  return best;
}

std::map<std::string, double> SolutionScores(const std::vector<const Trace*>& traces,
                                             const std::map<std::string, std::string>& solution_author,
                                             std::string* error) {
  std::map<std::string, double> scores;
  std::vector<std::string> baselines;
  for (const auto& [name, author] : solution_author)
    if (author == "baseline") baselines.push_back(name);
  if (baselines.size() != 1) {
    if (error)
      *error = baselines.empty() ? "no solution by author 'baseline'"
                                 : std::to_string(baselines.size()) + " solutions by author 'baseline' (FIB needs one)";
    return scores;
  }
  const std::string& baseline = baselines[0];
  // solution -> uuid -> best PASSED latency; and who failed anywhere.
  std::map<std::string, std::map<std::string, double>> best;
  std::map<std::string, bool> failed;
  for (const Trace* t : traces) {
    if (!t->solution || !t->evaluation) continue;
    const std::string& s = *t->solution;
    if (t->evaluation->status != "PASSED" || !t->evaluation->performance) {
      failed[s] = true;
      continue;
    }
    double latency = t->evaluation->performance->latency_ms;
    auto& slot = best[s];
    auto it = slot.find(t->workload.uuid);
    if (it == slot.end() || latency < it->second) slot[t->workload.uuid] = latency;
  }
  const auto& base = best[baseline];
  for (const auto& [name, author] : solution_author) {
    if (name == baseline) continue;
    if (failed[name]) {
      scores[name] = 0.0;
      continue;
    }
    double sum = 0;
    int n = 0;
    for (const auto& [uuid, latency] : best[name]) {
      auto b = base.find(uuid);
      if (b == base.end() || latency <= 0) continue;
      sum += b->second / latency;
      ++n;
    }
    scores[name] = n ? sum / n : 0.0;
  }
  return scores;
}

std::optional<AccelOptPick> AccelOptSelect(const TraceSet& set, const std::string& definition,
                                           const std::string& language, double min_latency_ms) {
  std::vector<const Trace*> traces = set.TracesOf(definition);
  // Step 1: uuid -> latency of the first trace seen with a performance record.
  std::vector<std::pair<std::string, double>> latency;
  for (const Trace* t : traces) {
    if (!t->evaluation || !t->evaluation->performance) continue;
    bool seen = false;
    for (const auto& [uuid, value] : latency) seen = seen || uuid == t->workload.uuid;
    if (!seen) latency.emplace_back(t->workload.uuid, t->evaluation->performance->latency_ms);
  }
  if (latency.empty()) return std::nullopt;
  std::stable_sort(latency.begin(), latency.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  auto heavy = std::find_if(latency.begin(), latency.end(), [&](const auto& e) { return e.second > min_latency_ms; });
  const auto& chosen = heavy != latency.end() ? *heavy : latency.back();
  AccelOptPick pick;
  pick.definition = definition;
  pick.workload_uuid = chosen.first;
  pick.workload_latency_ms = chosen.second;
  double best = -1;
  for (const Trace* t : traces) {
    if (t->workload.uuid != chosen.first || !t->evaluation || t->evaluation->status != "PASSED" ||
        !t->evaluation->performance || !t->solution)
      continue;
    const Solution* s = set.FindSolution(*t->solution);
    if (s == nullptr || s->spec.language != language) continue;
    if (t->evaluation->performance->speedup_factor > best) {
      best = t->evaluation->performance->speedup_factor;
      pick.solution = s->name;
      pick.speedup_factor = best;
      pick.latency_ms = t->evaluation->performance->latency_ms;
    }
  }
  if (pick.solution.empty()) return std::nullopt;
  return pick;
}

const std::vector<std::string>& AccelOptPrefixes() {
  static const std::vector<std::string> kPrefixes = {
      "gemm_n", "gqa_paged_decode_h", "gqa_paged_prefill_causal_h", "gqa_ragged_prefill_causal_h",
      "mla_paged_decode_h", "mla_paged_prefill_causal_h", "moe", "fused_add_rmsnorm_h", "rmsnorm_h"};
  return kPrefixes;
}

std::vector<AccelOptPick> AccelOptGroups(const std::vector<AccelOptPick>& picks) {
  std::vector<std::pair<std::string, AccelOptPick>> groups;
  for (const auto& pick : picks) {
    std::string key = pick.definition;
    for (const auto& prefix : AccelOptPrefixes())
      if (pick.definition.rfind(prefix, 0) == 0) {
        key = prefix;
        break;
      }
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) groups.emplace_back(key, pick);
    else if (pick.latency_ms > it->second.latency_ms) it->second = pick;
  }
  std::vector<AccelOptPick> out;
  for (auto& [key, pick] : groups) out.push_back(pick);
  return out;
}

}  // namespace accelopt::fib
