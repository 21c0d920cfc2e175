// native:nkibench_load - reads a benchmark directory in AccelOpt's NKIBench
// format (summary.json -> problems -> cases -> impls) into a flat case list.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "accelopt/plugin_sdk.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using accelopt::sdk::StageContext;
using accelopt::sdk::StageFailure;

namespace {

// AccelOpt's case name: problem + "_" + sorted "KEYvalue" parts.
std::string CaseName(const std::string& problem, const json& values) {
  std::vector<std::string> keys;
  for (const auto& [key, _] : values.items()) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  std::string name = problem;
  for (const auto& key : keys) {
    const json& v = values[key];
    name += "_" + key + (v.is_string() ? v.get<std::string>() : v.dump());
  }
  return name;
}

fs::path Resolve(const fs::path& dir, const json& value, const std::string& what) {
  if (!value.is_string()) throw StageFailure("config_error", what + " must be a path string");
  fs::path path = (dir / value.get<std::string>()).lexically_normal();
  if (!fs::exists(path)) throw StageFailure("config_error", what + " not found: " + path.string());
  return path;
}

bool WantCase(const std::string& selection, const std::string& case_id) {
  if (selection == "all") return true;
  bool small = case_id == "small";
  return selection == "small" ? small : !small;
}

// Tolerances AccelOpt's harness uses for the published NKIBench, whose
// summary.json does not carry them (docs/trainium.md, "Tolerances"):
// mamba is judged at 3e-5, every other problem at the default 2e-5.
double PublishedRelTol(const std::string& problem, double fallback) {
  return problem == "mamba" ? 3e-5 : fallback;
}

json Run(StageContext& ctx) {
  // Every default comes from the schema (kParams below).
  fs::path dir = fs::absolute(ctx.Param<std::string>("dir")).lexically_normal();
  fs::path summary_path = dir / "summary.json";
  std::ifstream in(summary_path);
  if (!in) throw StageFailure("config_error", "no summary.json in " + dir.string() + " (expected NKIBench format)");
  json summary = json::parse(in, nullptr, false);
  if (!summary.is_object()) throw StageFailure("config_error", summary_path.string() + ": not a JSON object");

  const std::string selection = ctx.Param<std::string>("cases");
  if (selection != "full" && selection != "small" && selection != "all") {
    throw StageFailure("config_error", "cases must be full, small or all, got '" + selection + "'");
  }
  const double default_tol = ctx.Param<double>("rel_tol");
  const json overrides = ctx.Param<json>("rel_tol_overrides");
  // The schema's keys_of has checked the names (validate, and the executor at start).
  const json wanted = ctx.Param<json>("problems");
  auto keep = [&wanted](const std::string& problem) {
    if (!wanted.is_array() || wanted.empty()) return true;
    return std::find(wanted.begin(), wanted.end(), json(problem)) != wanted.end();
  };

  json cases = json::array();
  json problems = json::array();
  for (const auto& [problem, entry] : summary.items()) {
    const std::string where = summary_path.string() + ": problem '" + problem + "'";
    if (!entry.is_object() || !entry.contains("cases") || !entry["cases"].is_object()) {
      throw StageFailure("config_error", where + " has no 'cases' object");
    }
    if (!keep(problem)) continue;
    problems.push_back(problem);
    // An explicit override wins, then the directory's own value, then the published one.
    double rel_tol = overrides.contains(problem) ? overrides[problem].get<double>()
                                                 : entry.value("rel_tol", PublishedRelTol(problem, default_tol));
    for (const auto& [case_id, spec] : entry["cases"].items()) {
      if (!WantCase(selection, case_id)) continue;
      const json values = spec.value("values", json::object());
      const json impls = spec.value("impls", json::array());
      if (!impls.is_array() || impls.empty()) throw StageFailure("config_error", where + " case " + case_id + " has no impls");
      for (size_t i = 0; i < impls.size(); ++i) {
        const std::string what = where + " case " + case_id + " impl " + std::to_string(i);
        std::string case_name = CaseName(problem, values);
        cases.push_back({{"problem", problem},
                         {"case_id", case_id},
                         {"values", values},
                         {"case_name", case_name},
                         {"service_name", case_name + "_ID" + std::to_string(i)},
                         {"task", Resolve(dir, impls[i].value("task", json()), what + " task").string()},
                         {"kernel", Resolve(dir, impls[i].value("kernel", json()), what + " kernel").string()},
                         {"rel_tol", rel_tol}});
      }
    }
  }
  ctx.Info("loaded " + std::to_string(cases.size()) + " cases of " + std::to_string(problems.size()) + " problems from " + dir.string());
  return {{"dir", dir.string()}, {"problems", problems}, {"cases", cases}};
}

constexpr const char* kParams = R"JSON({
  "dir": {"type": "string", "required": true, "path": "dir", "doc": "NKIBench-format directory holding summary.json (nkibench/README.md)"},
  "problems": {"type": "array", "default": [], "keys_of": {"param": "dir", "file": "summary.json"}, "doc": "problem names to keep (empty: all); each must be a problem of dir/summary.json, which validate checks"},
  "cases": {"type": "string", "default": "full", "enum": ["full", "small", "all"], "doc": "full, small (case id 'small') or all"},
  "rel_tol": {"type": "number", "default": 2e-05, "doc": "default relative L2 tolerance"},
  "rel_tol_overrides": {"type": "object", "default": {}, "doc": "problem -> rel_tol (wins over summary.json and the published tolerances: mamba 3e-5)"}
})JSON";

constexpr const char* kOutputs = R"JSON({
  "dir": {"type": "string", "doc": "the benchmark directory, absolute"},
  "problems": {"type": "array", "doc": "the kept problem names, in summary.json order"},
  "cases": {"type": "array", "doc": "one object per kernel: problem, case_id, case_name, values, task (reference), kernel, rel_tol, ..."}
})JSON";

const AccelStageDescriptor kStages[] = {
    ACCELOPT_STAGE_WITH_OUTPUTS("nkibench_load", "Load an NKIBench-format benchmark directory into a list of cases (problem, values, reference, kernel).",
                   kParams, kOutputs, Run),
};

}  // namespace

ACCELOPT_EXPORT_PLUGIN("nkibench", "0.1.0", kStages)
