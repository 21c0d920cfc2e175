// native:select_traces - which definitions, workloads and solutions of a FIB
// trace set to evaluate (docs/flashinfer.md): FIB's query filters and best
// trace (flashinfer-facts §1.6), the `baseline` author's solution, or AccelOpt's
// selection of a heavy workload and its best baseline trace (§3.2).
#include <algorithm>
#include <set>

#include "common.h"
#include "flashinfer/query.h"
#include "stages.h"

namespace accelopt_fib_plugin {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

json TraceSummary(const fib::Trace& t) {
  json out = {{"solution", t.solution.value_or("")}, {"workload", t.workload.uuid}};
  if (t.evaluation) {
    out["status"] = t.evaluation->status;
    if (t.evaluation->performance) {
      out["latency_ms"] = t.evaluation->performance->latency_ms;
      out["reference_latency_ms"] = t.evaluation->performance->reference_latency_ms;
      out["speedup_factor"] = t.evaluation->performance->speedup_factor;
    }
    out["hardware"] = t.evaluation->environment.hardware;
  }
  return out;
}

bool AxesMatch(const fib::Workload& w, const json& axes) {
  if (!axes.is_object()) return true;
  for (auto it = axes.begin(); it != axes.end(); ++it) {
    const int64_t* v = fib::Find(w.axes, it.key());
    if (v == nullptr || !it.value().is_number_integer() || *v != it.value().get<int64_t>()) return false;
  }
  return true;
}

}  // namespace

json RunSelectTraces(accelopt::sdk::StageContext& ctx) {
  const std::string root = ctx.Param<std::string>("trace_set");
  if (root.empty()) throw accelopt::sdk::StageFailure("config_error", "trace_set is empty (give a FIB trace-set directory)");
  fib::LoadOptions options;
  options.python = HostPython(ctx);
  fib::TraceSet set;
  try {
    set = fib::LoadTraceSet(root, options);
  } catch (const std::exception& error) {
    throw accelopt::sdk::StageFailure("config_error", std::string("trace_set: ") + error.what());
  }
  const auto definitions = StringList(ctx.Param<json>("definitions"));
  const auto op_types = StringList(ctx.Param<json>("op_types"));
  const auto authors = StringList(ctx.Param<json>("authors"));
  const auto languages = StringList(ctx.Param<json>("languages"));
  const auto solution_names = StringList(ctx.Param<json>("solutions"));
  const auto tags = StringList(ctx.Param<json>("tags"));
  const json axes = ctx.Param<json>("axes");
  const int64_t max_workloads = ctx.Param<int64_t>("max_workloads");
  const std::string mode = ctx.Param<std::string>("mode");
  const bool include_baseline = ctx.Param<bool>("include_baseline");
  if (mode != "all" && mode != "best" && mode != "accelopt")
    throw accelopt::sdk::StageFailure("config_error", "mode must be all, best or accelopt, got '" + mode + "'");

  for (const auto& line : ProblemLines(set.problems, true)) ctx.Warn("trace set: " + line + " (left out)");

  std::vector<fib::AccelOptPick> picks;
  json items = json::array();
  json skipped = json::array();
  for (const auto& located : set.definitions) {
    const fib::Definition& d = located.value;
    if (!definitions.empty() && !Contains(definitions, d.name)) continue;
    if (!op_types.empty() && !Contains(op_types, d.op_type)) continue;
    bool tagged = true;
    for (const auto& tag : tags) tagged = tagged && Contains(d.Tags(), tag);
    if (!tagged) continue;

    std::vector<const fib::Workload*> workloads;
    for (const fib::Workload* w : set.WorkloadsOf(d.name))
      if (AxesMatch(*w, axes)) workloads.push_back(w);
    std::vector<const fib::Solution*> solutions;
    const fib::Solution* baseline = nullptr;
    int baselines = 0;
    for (const fib::Solution* s : set.SolutionsOf(d.name)) {
      if (s->author == "baseline") {
        baseline = s;
        ++baselines;
      }
      bool wanted = (authors.empty() || Contains(authors, s->author)) &&
                    (languages.empty() || Contains(languages, s->spec.language)) &&
                    (solution_names.empty() || Contains(solution_names, s->name));
      if (wanted || (include_baseline && s->author == "baseline")) solutions.push_back(s);
    }
    if (baselines != 1) baseline = nullptr;
    const fib::Trace* best = fib::BestTrace(set.TracesOf(d.name), d.name);

    if (mode == "accelopt") {
      auto pick = fib::AccelOptSelect(set, d.name, ctx.Param<std::string>("accelopt_language"),
                                      ctx.Param<double>("accelopt_min_latency_ms"));
      if (!pick) {
        skipped.push_back({{"definition", d.name}, {"reason", "no PASSED " + ctx.Param<std::string>("accelopt_language") +
                                                                   " trace with a performance record"}});
        continue;
      }
      picks.push_back(*pick);
      const fib::Solution* chosen = set.FindSolution(pick->solution);
      solutions.assign(1, chosen);
      workloads.erase(std::remove_if(workloads.begin(), workloads.end(),
                                     [&](const fib::Workload* w) { return w->uuid != pick->workload_uuid; }),
                      workloads.end());
    } else if (mode == "best") {
      if (best == nullptr || !best->solution) {
        skipped.push_back({{"definition", d.name}, {"reason", "no PASSED trace within atol/rtol 1e-2"}});
        continue;
      }
      const fib::Solution* chosen = set.FindSolution(*best->solution);
      solutions.clear();
      if (chosen) solutions.push_back(chosen);
      if (include_baseline && baseline && baseline != chosen) solutions.push_back(baseline);
    }
    if (max_workloads > 0 && static_cast<int64_t>(workloads.size()) > max_workloads) workloads.resize(max_workloads);
    if (workloads.empty()) {
      skipped.push_back({{"definition", d.name}, {"reason", "no workloads"}});
      continue;
    }
    if (solutions.empty() && ctx.Param<bool>("require_solutions")) {
      skipped.push_back({{"definition", d.name}, {"reason", "no solutions to evaluate"}});
      continue;
    }
    json item = {{"definition", d.name},
                 {"op_type", d.op_type},
                 {"definition_text", fib::DumpCompact(fib::ToJson(d))},
                 {"trace_set", set.root},
                 {"layout", set.layout},
                 {"workloads", json::array()},
                 {"solutions", json::array()},
                 {"baseline_solution", baseline ? json(baseline->name) : json(nullptr)},
                 {"best_trace", best ? TraceSummary(*best) : json(nullptr)}};
    for (const fib::Workload* w : workloads) item["workloads"].push_back(ToJson(fib::ToJson(*w)));
    for (const fib::Solution* s : solutions) item["solutions"].push_back(ToJson(fib::ToJson(*s)));
    items.push_back(std::move(item));
  }
  if (mode == "accelopt" && ctx.Param<bool>("accelopt_group")) {
    std::set<std::string> keep;
    for (const auto& pick : fib::AccelOptGroups(picks)) keep.insert(pick.definition);
    json kept = json::array();
    for (auto& item : items)
      if (keep.count(item["definition"].get<std::string>())) kept.push_back(std::move(item));
      else skipped.push_back({{"definition", item["definition"]}, {"reason", "not the largest latency of its AccelOpt group"}});
    items = std::move(kept);
  }
  json picks_json = json::array();
  for (const auto& p : picks)
    picks_json.push_back({{"definition", p.definition}, {"workload", p.workload_uuid}, {"solution", p.solution},
                          {"workload_latency_ms", p.workload_latency_ms}, {"latency_ms", p.latency_ms},
                          {"speedup_factor", p.speedup_factor}});
  size_t n_solutions = 0, n_workloads = 0;
  for (const auto& item : items) {
    n_solutions += item["solutions"].size();
    n_workloads += item["workloads"].size();
  }
  ctx.Info("selected " + std::to_string(items.size()) + " definition(s), " + std::to_string(n_workloads) +
           " workload(s), " + std::to_string(n_solutions) + " solution(s) from " + set.root + " (layout " + set.layout +
           ")");
  accelopt::sdk::WriteJsonFile(std::filesystem::path(ctx.StageDir()) / "selection.json",
                               {{"items", items}, {"skipped", skipped}, {"accelopt_picks", picks_json}});
  return {{"items", items},
          {"trace_set", set.root},
          {"layout", set.layout},
          {"skipped", skipped},
          {"accelopt_picks", picks_json},
          {"problems", ProblemLines(set.problems, true)}};
}

}  // namespace accelopt_fib_plugin
