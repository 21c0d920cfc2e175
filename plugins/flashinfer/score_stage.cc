// native:fib_score - evaluated FlashInfer-Bench candidates as the search stages'
// records (plugins/search/search_common.h), so that the graph search
// (native:mcgs_*) and the agent (native:agent_*) run on FIB definitions with
// the same stages as on NKIBench kernels (docs/flashinfer.md, "Graph search and
// agent"). A record is its candidate with:
//   status      ok | failed (the search's words), fib_status the FIB status
//   latency_ms  mean over the workloads (ms); samples_ms, trials_ms its repeats
//   error       {kind, message} of a failure: compile_error (COMPILE_ERROR),
//               runtime_error, timeout, wrong_result (INCORRECT_*), not_run
//   speedup, speedup_ci, noise            against its parent (noise: faster | slower | within | unmeasured)
//   baseline_speedup_ci, baseline_noise   against the problem's baseline
//   kernel      the entry source as a file (the search hashes it into a state)
//   validation  "full": FIB checks every workload it times
// A candidate without a parent is a problem's start: its baseline fields are its own.
#include <filesystem>

#include "scoring.h"
#include "common.h"
#include "stages.h"

namespace accelopt_fib_plugin {
namespace {

// The search's error kind of a FIB status (native:agent_step's Judge reads it).
std::string ErrorKind(const std::string& status) {
  if (status == "COMPILE_ERROR") return "compile_error";
  if (status == "RUNTIME_ERROR") return "runtime_error";
  if (status == "TIMEOUT") return "timeout";
  if (status.rfind("INCORRECT", 0) == 0) return "wrong_result";
  if (status == "NOT_RUN") return "not_run";
  return "error";
}

std::string CaseName(const json& c) { return c.value("case_name", c.value("case", std::string())); }

}  // namespace

json RunFibScore(accelopt::sdk::StageContext& ctx) {
  const json candidates = accelopt::sdk::ListParam(ctx.Param<json>("candidates"), "candidates");
  const double confidence = ctx.Param<double>("confidence");
  if (!(confidence > 0 && confidence < 1)) throw accelopt::sdk::StageFailure("config_error", "confidence must be in (0, 1)");
  const std::map<std::string, Scored> scored = ScoreResults(ctx.Param<json>("results"));
  json records = json::array(), best = json::object();
  int passed = 0;
  for (auto c : candidates) {
    if (!c.is_object() || !c.contains("solution")) continue;
    const std::string name = c["solution"].value("name", "");
    const std::string case_name = CaseName(c);
    c["case_name"] = case_name;
    c["case"] = case_name;
    if (!c.contains("problem")) c["problem"] = case_name;
    if (!c.contains("kernel")) c["kernel"] = WriteKernelSource(ctx, c["solution"]);
    auto it = scored.find(name);
    const std::string status = it == scored.end() ? "NOT_RUN" : it->second.status;
    const bool ok = it != scored.end() && status == "PASSED" && it->second.latency_ms > 0;
    c["fib_status"] = status;
    c["status"] = ok ? "ok" : "failed";
    c["validation"] = "full";
    c["metrics"] = json::object();
    if (!ok) {
      const std::string log = it == scored.end() ? "no evaluation came back (not run)" : it->second.log;
      c["latency_ms"] = nullptr;
      c["error"] = {{"kind", ErrorKind(status)}, {"message", status + (log.empty() ? "" : ": " + log.substr(0, 500))}};
      records.push_back(c);
      continue;
    }
    ++passed;
    c.erase("error");
    c["latency_ms"] = it->second.latency_ms;
    c["trials_ms"] = it->second.trials_ms;
    c["samples_ms"] = it->second.samples_ms;
    const bool start = c.value("parent", json()).is_null() || !c.contains("parent_latency_ms");
    if (start) {  // a problem's start is its own baseline
      c["baseline_latency_ms"] = it->second.latency_ms;
      c["baseline_trials_ms"] = it->second.trials_ms;
      c["baseline_samples_ms"] = it->second.samples_ms;
    }
    const double parent = c.value("parent_latency_ms", 0.0);
    if (parent > 0) {
      c["speedup"] = parent / it->second.latency_ms;
      Compare(accelopt::sdk::Repeats(c, "parent_", c, ""), confidence, c, "");
    }
    const double baseline = c.value("baseline_latency_ms", 0.0);
    if (baseline > 0) c["speedup_vs_baseline"] = baseline / it->second.latency_ms;
    Compare(accelopt::sdk::Repeats(c, "baseline_", c, ""), confidence, c, "baseline_");
    if (!best.contains(case_name) || it->second.latency_ms < best[case_name].value("latency_ms", 1e300)) best[case_name] = c;
    records.push_back(c);
  }
  ctx.Info(std::to_string(passed) + " of " + std::to_string(records.size()) + " candidate(s) passed");
  return {{"records", records}, {"best", best}, {"passed", passed}};
}

}  // namespace accelopt_fib_plugin
