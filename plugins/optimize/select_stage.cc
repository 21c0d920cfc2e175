// native:select - the beam of the next iteration. Pool per case = the current
// beam + this iteration's correct candidates + the best kernel so far; sorted
// by latency (stable: older entries win ties); duplicates (same normalized
// source) keep their fastest entry; the best so far always stays (elitism).
// A candidate checked on the screen's seeds only (validation "screened") never
// enters: the output confirm_below_ms tells native:profile which screened
// candidates could, so that those are confirmed first (docs/search.md). A case
// whose every reply of the iteration converged (a repeat after the re-ask naming
// it) leaves the beam: output `finished` lists those cases. Timed records (FlashInfer-Bench:
// samples_ms, trials_ms) replace the best only when faster beyond their measured noise
// (`confidence`; accelopt/sdk/noise.hpp); the beam still ranks by mean latency.
#include <filesystem>
#include <map>
#include <set>

#include "accelopt/sdk/noise.hpp"
#include "stages.h"

namespace fs = std::filesystem;

namespace accelopt_optimize {
namespace {

// Beam member form of a record: drop per-evaluation fields the beam does not need.
json AsMember(json record) {
  for (const char* key : {"status", "error", "compiled", "correct", "fix_attempts", "diff", "parent_kernel"}) record.erase(key);
  return record;
}

std::string SourceKey(const json& candidate) {
  try {
    return HashHex(NormalizeSource(ReadText(candidate.value("kernel", ""))));
  } catch (const std::exception&) {
    return candidate.value("source_hash", candidate.value("id", ""));
  }
}

}  // namespace

json RunSelect(StageContext& ctx) {
  const json& with = ctx.With();
  const json beam = ListParam(with.value("beam", json()), "beam");
  const json records = ListParam(with.value("records", json()), "records");
  json best = with.value("best", json::object());
  if (!best.is_object()) best = json::object();
  const int width = std::max<int>(1, with.value("beam_width", 6));
  const double confidence = with.value("confidence", 0.95);
  if (!(confidence > 0 && confidence < 1)) throw StageFailure("config_error", "confidence must be in (0, 1)");

  // Pool per case in insertion order: best so far, current beam, new candidates.
  std::map<std::string, std::vector<json>> pools;
  std::vector<std::string> order;
  auto add = [&](const json& candidate) {
    auto latency = Number(candidate, "latency_ms");
    if (!latency || *latency <= 0) return;
    const std::string case_name = candidate.value("case_name", "");
    if (!pools.count(case_name)) order.push_back(case_name);
    pools[case_name].push_back(candidate);
  };
  for (const auto& [case_name, candidate] : best.items()) add(candidate);
  for (const auto& member : beam) add(member);
  // A converged model (docs/llm.md, "Re-asks"): a case whose every candidate of this
  // iteration repeated an evaluated kernel even after the re-ask naming it is finished: its
  // kernels leave the beam (the best so far stays the best), so no further round asks again.
  std::map<std::string, std::pair<int, int>> replies;  // case -> (records, converged failures)
  for (const auto& record : records) {
    auto& [n, converged] = replies[record.value("case_name", "")];
    ++n;
    if (record.value("status", "") != "ok" && record.value("converged", false)) ++converged;
  }
  std::set<std::string> finished;
  for (const auto& [case_name, counts] : replies) {
    if (counts.first > 0 && counts.first == counts.second) {
      finished.insert(case_name);
      ctx.Info(case_name + ": finished: the model converged (all " + std::to_string(counts.first) +
               " replies of this iteration repeated an evaluated kernel after a re-ask naming the repeat)");
    }
  }
  // A case whose LLM spend cap (or the run's) is reached is finished too: its search is over,
  // the best so far stays (docs/llm.md, "Spend caps"). Output `stopped` says why.
  json beam_and_records = beam;
  for (const auto& record : records) beam_and_records.push_back(record);
  const auto stopped = SpendStopped(ctx, with.value("llm", std::string("default")), beam_and_records);
  for (const auto& [case_name, reason] : stopped) {
    if (finished.insert(case_name).second) ctx.Info(case_name + ": search stopped: " + reason);
  }
  int offered = 0;
  json dropped = json::array();
  for (const auto& record : records) {
    if (record.value("status", "") != "ok") continue;
    if (!ValidatedForResult(record)) {
      dropped.push_back({{"id", record.value("id", "")}, {"reason", "screened only (not confirmed)"}});
      continue;
    }
    add(AsMember(record));
    ++offered;
  }

  json next = json::array();
  json new_best = best;
  json improved = json::array();
  json confirm_below = json::object();
  for (const auto& case_name : order) {
    auto& pool = pools[case_name];
    std::stable_sort(pool.begin(), pool.end(), [](const json& a, const json& b) {
      return a["latency_ms"].get<double>() < b["latency_ms"].get<double>();
    });
    std::set<std::string> seen_sources;
    std::set<std::string> seen_ids;
    int taken = 0;
    for (const auto& candidate : pool) {
      const std::string id = candidate.value("id", "");
      if (seen_ids.count(id)) continue;  // the same kernel offered twice (best + beam)
      seen_ids.insert(id);
      const std::string key = SourceKey(candidate);
      if (seen_sources.count(key)) {
        dropped.push_back({{"id", id}, {"reason", "duplicate source"}});
        continue;
      }
      seen_sources.insert(key);
      if (taken >= width || finished.count(case_name)) continue;
      next.push_back(candidate);
      if (++taken == width) confirm_below[case_name] = candidate["latency_ms"];  // the full beam's slowest member
    }
    // Elitism: the pool's first (fastest) entry is the best so far, unless its gain over the
    // best is within the measured noise of timed records.
    const json& fastest = pool.front();
    const bool had = best.contains(case_name);
    std::string noise;
    if (had && fastest.value("id", "") != best[case_name].value("id", "") &&
        !accelopt::sdk::BeyondNoise(best[case_name], fastest, confidence, &noise)) {
      ctx.Info(case_name + ": " + fastest.value("id", "") + " is not the new best: its gain over " + best[case_name].value("id", "") +
               " is within the measured noise (" + noise + ")");
    } else if (!had || fastest.value("id", "") != best[case_name].value("id", "")) {
      if (had && fastest["latency_ms"].get<double>() < best[case_name]["latency_ms"].get<double>()) {
        improved.push_back({{"case_name", case_name}, {"id", fastest["id"]}, {"latency_ms", fastest["latency_ms"]},
                            {"previous_latency_ms", best[case_name]["latency_ms"]},
                            {"speedup_vs_baseline", fastest.value("speedup_vs_baseline", json())}});
        ctx.Info(case_name + ": new best " + fastest.value("id", "") + " at " + Fixed(fastest["latency_ms"].get<double>(), 5) +
                 " ms (" + (fastest["speedup_vs_baseline"].is_number() ? Fixed(fastest["speedup_vs_baseline"].get<double>()) : "?") +
                 "x vs baseline)");
      }
      if (!had || fastest["latency_ms"].get<double>() < best[case_name]["latency_ms"].get<double>()) new_best[case_name] = fastest;
    }
  }
  WriteJson(fs::path(ctx.StageDir()) / "beam.json", next);
  WriteJson(fs::path(ctx.StageDir()) / "best.json", new_best);
  ctx.Info("beam: " + std::to_string(next.size()) + " kernels from " + std::to_string(offered) + " new correct candidates");
  return {{"beam", next}, {"best", new_best}, {"improved", improved}, {"dropped", dropped}, {"confirm_below_ms", confirm_below},
          {"finished", json(finished)}, {"stopped", StoppedJson(stopped)}};
}

}  // namespace accelopt_optimize
