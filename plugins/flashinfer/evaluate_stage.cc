// native:fib_evaluate - evaluates the solutions of one select_traces item on
// its workloads as FlashInfer-Bench does (flashinfer-facts §2.3-2.7; docs/flashinfer.md)
// and writes FIB traces.
//
// Per workload: the trusted side draws seeded inputs for every trial
// (accelopt.fib.trusted.open_workload); the definition's reference runs each
// trial in a worker (its outputs are kept in the host, its median time per
// trial is the reference latency); then every solution runs each trial in a
// fresh worker process and is judged in the host. Python solutions run on
// CPU torch in the `torch` worker pool; cuda/cpp solutions are built with
// nvcc against the tvm-ffi shim (a failed build is a COMPILE_ERROR trace)
// and run through the CUDA driver API in accelopt-fib-cuda-run; triton
// solutions run in a subprocess of the GPU machine's own python3. Where
// there is no device, no trace is written for them: they are listed under
// `not_run` with the reason.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <stdexcept>

#include "common.h"
#include "flashinfer/cuda_build.h"
#include "stages.h"

namespace accelopt_fib_plugin {
namespace fs = std::filesystem;
namespace {

struct Config {
  int64_t seed = 0, trials = 3, warmup = 10, iterations = 50;
  bool cold_cache = true, profile_baseline = true, static_checks = true;
  double atol = 1e-2, rtol = 1e-2, timeout_s = 300;
  json required_ratio;  // null: FIB's default for the definition
  int64_t memory_bytes = 0;
  int64_t max_workload_bytes = 0;  // 0: accelopt.fib.inputs.default_workload_bytes()
  std::string isolation = "worker", dps_missing = "auto", cuda_arch = "sm_90a";
  std::string layout = "current";
};

std::string TimingText(const Config& c, const json& open, const std::string& where) {
  std::string seeds;
  for (const auto& s : open.value("seeds", json::array())) seeds += (seeds.empty() ? "" : ", ") + s.dump();
  int64_t flush = open.value("flush_bytes", int64_t{0});
  return "[accelopt-host] " + where + "; timing: warm-up " + std::to_string(c.warmup) + " calls, " +
         std::to_string(c.iterations) + " timed calls per trial, median per trial, mean over " +
         std::to_string(c.trials) + " trials on fresh inputs" +
         (flush > 0 ? ", cache flushed before every call (" + std::to_string(flush >> 20) + " MiB zeroed)" : "") +
         "; outputs checked after timing; input seeds: [" + seeds + "]";
}

// The DPS choice sent to the worker: the spec's, else what dps_missing says
// (null: the worker decides from the signature).
json DpsFor(const fib::Solution& s, const Config& c) {
  if (s.spec.destination_passing_style) return *s.spec.destination_passing_style;
  if (c.dps_missing == "dps") return true;
  if (c.dps_missing == "value") return false;
  return nullptr;  // auto
}

bool DpsDefault(const Config& c) {
  if (c.dps_missing == "value") return false;
  if (c.dps_missing == "dps") return true;
  return c.layout != "accelopt";  // FIB's default since 2025-12-24; AccelOpt's older data returns outputs
}

double Num(const json& v, double fallback = 0) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    auto d = fib::FloatFrom(fib::ojson(v.get<std::string>()));
    if (d) return *d;
  }
  return fallback;
}

// One trial through the host's isolated-call service (a worker of the torch
// pool; in-process when no pool is installed). Worker failures become verdicts.
json Trial(accelopt::sdk::StageContext& ctx, const Config& c, json arg) {
  json limits = {{"isolation", c.isolation}, {"timeout_s", c.timeout_s}};
  if (c.memory_bytes > 0) limits["memory_bytes"] = c.memory_bytes;
  try {
    return ctx.IsolatedCall(accelopt::api::kFibTrial, arg, limits);
  } catch (const accelopt::sdk::StageFailure& failure) {
    if (failure.kind == "config_error") throw;
    std::string kind = failure.kind;
    return {{"role", arg.value("role", "solution")},
            {"status", kind == "timeout" ? "TIMEOUT" : "RUNTIME_ERROR"},
            {"log", kind + ": " + failure.what()}};
  }
}

// FIB's Evaluation of one (solution, workload) from its trial verdicts.
// `trial_ms` (when given) receives each passed trial's median and `samples_ms` every timed call
// of them, the repeats fib_score's noise-aware speedups need (docs/optimize.md, "Noise-aware
// speedups").
fib::Evaluation Aggregate(const std::vector<json>& verdicts, double reference_ms, const fib::Environment& env,
                          const std::string& timing_text, const json& seeds, std::vector<double>* trial_ms = nullptr,
                          std::vector<double>* samples_ms = nullptr) {
  fib::Evaluation e;
  e.environment = env;
  e.timestamp = IsoNow();
  std::string log;
  double max_abs = 0, max_rel = 0, ratio = 1;
  std::vector<double> medians;
  std::string status = "PASSED";
  bool have_errors = false;
  for (const auto& v : verdicts) {
    std::string text = v.value("log", "");
    if (!text.empty()) log += (log.empty() ? "" : "\n") + text;
    if (v.contains("max_absolute_error")) {
      have_errors = true;
      double a = Num(v["max_absolute_error"]), r = Num(v["max_relative_error"]);
      max_abs = std::isnan(a) || std::isnan(max_abs) ? NAN : std::max(max_abs, a);
      max_rel = std::isnan(r) || std::isnan(max_rel) ? NAN : std::max(max_rel, r);
      if (v.contains("matched_ratio")) ratio = std::min(ratio, Num(v["matched_ratio"], 1));
    }
    std::string s = v.value("status", "RUNTIME_ERROR");
    if (s != "PASSED") {
      status = s;
      break;
    }
    medians.push_back(Num(v.value("median_ms", json(0.0))));
    if (samples_ms)
      for (const auto& x : v.value("samples_ms", json::array()))
        if (x.is_number()) samples_ms->push_back(x.get<double>());
  }
  e.status = status;
  log += (log.empty() ? "" : "\n") + timing_text;
  if (log.size() > (5u << 20)) log = log.substr(0, 5u << 20) + "[log truncated]";
  e.log = log;
  if (status == "PASSED" || (status == "INCORRECT_NUMERICAL" && have_errors)) {
    fib::Correctness corr;
    corr.max_absolute_error = max_abs;
    corr.max_relative_error = max_rel;
    corr.extra = fib::ojson::object();
    corr.extra["matched_ratio"] = fib::FloatJson(ratio);
    corr.extra["timing_method"] = "cpu:perf_counter_ns";
    corr.extra["seeds"] = ToOrdered(seeds);
    e.correctness = corr;
  } else if (status == "INCORRECT_NUMERICAL") {
    fib::Correctness corr;  // FIB requires correctness with this status
    corr.max_absolute_error = corr.max_relative_error = NAN;
    e.correctness = corr;
  }
  if (status == "PASSED") {
    fib::Performance p;
    p.latency_ms = medians.empty() ? 0 : std::accumulate(medians.begin(), medians.end(), 0.0) / medians.size();
    p.reference_latency_ms = reference_ms;
    p.speedup_factor = (reference_ms > 0 && p.latency_ms > 0) ? reference_ms / p.latency_ms : 0.0;
    e.performance = p;
    if (trial_ms) *trial_ms = medians;
  }
  return e;
}

fib::Evaluation SimpleEvaluation(const std::string& status, const std::string& log, const fib::Environment& env) {
  fib::Evaluation e;
  e.status = status;
  e.environment = env;
  e.timestamp = IsoNow();
  e.log = log.size() > (5u << 20) ? log.substr(0, 5u << 20) + "[log truncated]" : log;
  return e;
}

fib::Environment EnvironmentFrom(const json& j) {
  fib::Environment env;
  env.hardware = j.value("hardware", "cpu");
  if (j.contains("libs") && j["libs"].is_object())
    for (auto it = j["libs"].begin(); it != j["libs"].end(); ++it)
      if (it.value().is_string()) env.libs.emplace_back(it.key(), it.value().get<std::string>());
  return env;
}

// cuda/cpp builds, one per solution hash and stage call.
struct Builds {
  std::map<std::string, fib::CudaBuild> done;
  std::optional<json> device;  // accelopt-fib-cuda-run --probe
};

json ProbeDevice(Builds& builds) {
  if (builds.device) return *builds.device;
  std::string out;
  int rc = fib::RunProcess({ACCELOPT_FIB_CUDA_RUNNER, "--probe"}, 60, &out);
  json parsed = json::parse(out, nullptr, false);
  if (!parsed.is_object()) parsed = {{"device", false}, {"message", "accelopt-fib-cuda-run --probe: " + out}};
  if (rc != 0) parsed["device"] = false;
  builds.device = parsed;
  return parsed;
}

}  // namespace

json RunFibEvaluate(accelopt::sdk::StageContext& ctx) {
  const json item = ctx.Param<json>("item");
  fib::Definition definition = ItemDefinition(item);
  Config c;
  c.seed = ctx.Param<int64_t>("seed");
  c.trials = std::max<int64_t>(1, ctx.Param<int64_t>("trials"));
  c.warmup = ctx.Param<int64_t>("warmup");
  c.iterations = std::max<int64_t>(1, ctx.Param<int64_t>("iterations"));
  c.cold_cache = ctx.Param<bool>("cold_cache");
  c.profile_baseline = ctx.Param<bool>("profile_baseline");
  c.static_checks = ctx.Param<bool>("static_checks");
  c.atol = ctx.Param<double>("atol");
  c.rtol = ctx.Param<double>("rtol");
  c.required_ratio = ctx.OptionalParam<double>("required_matched_ratio") ? json(*ctx.OptionalParam<double>("required_matched_ratio"))
                                                                         : json(nullptr);
  c.timeout_s = ctx.Param<double>("timeout_s");
  c.memory_bytes = ctx.Param<int64_t>("memory_bytes");
  c.max_workload_bytes = ctx.Param<int64_t>("max_workload_bytes");
  if (c.max_workload_bytes < 0) throw accelopt::sdk::StageFailure("config_error", "max_workload_bytes must be >= 0");
  c.isolation = ctx.Param<std::string>("isolation");
  c.dps_missing = ctx.Param<std::string>("dps_missing");
  c.cuda_arch = ctx.Param<std::string>("cuda_arch");
  c.layout = item.value("layout", "current");
  if (c.isolation != "worker" && c.isolation != "inprocess")
    throw accelopt::sdk::StageFailure("config_error", "isolation must be worker or inprocess");
  if (c.dps_missing != "auto" && c.dps_missing != "dps" && c.dps_missing != "value")
    throw accelopt::sdk::StageFailure("config_error", "dps_missing must be auto, dps or value");

  std::vector<fib::Solution> solutions;
  json given = ctx.Param<json>("solutions");
  const json& list = given.is_array() && !given.empty() ? given : item.value("solutions", json::array());
  for (const auto& s : list) solutions.push_back(ParseSolutionJson(s));
  std::vector<fib::Workload> workloads;
  for (const auto& w : item.value("workloads", json::array())) workloads.push_back(ParseWorkloadJson(w));
  const std::string root = item.value("trace_set", std::string("."));

  json torch = ctx.PythonCall(accelopt::api::kFibTorchAvailable, nullptr);
  if (!torch.value("available", false))
    throw accelopt::sdk::StageFailure("config_error", "the host's Python has no torch (" + torch.value("reason", std::string("?")) +
                                                          "): install Debian's python3-torch (scripts/setup.sh does)");
  fib::Environment env = EnvironmentFrom(ctx.PythonCall(accelopt::api::kFibEnvironment, nullptr));

  fs::path stage_dir = ctx.StageDir();
  std::string traces_dir = ctx.Param<std::string>("traces_dir");
  if (traces_dir.empty()) traces_dir = (fs::path(ctx.RunDir()) / "traces").string();
  Builds builds;
  std::map<std::string, std::vector<fib::Trace>> by_author;  // author -> traces
  json results = json::array(), skipped = json::array(), not_run = json::array();
  json tolerance = {{"atol", c.atol}, {"rtol", c.rtol}, {"required_matched_ratio", c.required_ratio}};
  const std::string def_text = item["definition_text"].get<std::string>();
  int64_t done = 0;
  const int64_t total = static_cast<int64_t>(workloads.size() * std::max<size_t>(1, solutions.size()));

  for (const auto& workload : workloads) {
    if (ctx.Cancelled() || solutions.empty()) break;
    json wl = ToJson(fib::ToJson(workload));
    json open = ctx.PythonCall(accelopt::api::kFibOpenWorkload,
                               {{"definition_text", def_text}, {"workload", wl}, {"root", root}, {"seed", c.seed},
                                {"trials", c.trials},
                                {"timing", {{"warmup", c.warmup}, {"iterations", c.iterations}, {"cold_cache", c.cold_cache}}},
                                {"profile_baseline", c.profile_baseline}, {"tolerance", tolerance},
                                {"max_workload_bytes", c.max_workload_bytes}});
    if (open.contains("error")) {
      ctx.Warn(definition.name + " " + workload.uuid + ": inputs: " + open["error"].get<std::string>());
      skipped.push_back({{"workload", workload.uuid}, {"reason", "inputs: " + open["error"].get<std::string>()}});
      done += std::max<size_t>(1, solutions.size());
      continue;
    }
    const std::string baseline = open["baseline"];
    std::vector<double> reference_ms;
    std::string reference_error;
    for (int64_t t = 0; t < c.trials && reference_error.empty(); ++t) {
      json v = Trial(ctx, c, {{"baseline", baseline}, {"trial", t}, {"role", "reference"}});
      if (v.value("status", "") != "OK") reference_error = v.value("status", "?") + ": " + v.value("log", "");
      else reference_ms.push_back(Num(v.value("median_ms", json(0.0))));
    }
    if (!reference_error.empty()) {
      ctx.Warn(definition.name + " " + workload.uuid + ": the reference failed: " + reference_error.substr(0, 400));
      skipped.push_back({{"workload", workload.uuid}, {"reason", "reference failed: " + reference_error}});
      ctx.PythonCall(accelopt::api::kFibCloseWorkload, {{"baseline", baseline}});
      done += std::max<size_t>(1, solutions.size());
      continue;
    }
    double ref_ms = c.profile_baseline && !reference_ms.empty()
                        ? std::accumulate(reference_ms.begin(), reference_ms.end(), 0.0) / reference_ms.size()
                        : 0.0;
    const std::string cpu_text = TimingText(c, open, "CPU torch worker (" + env.hardware + ")");

    for (const auto& solution : solutions) {
      if (ctx.Cancelled()) break;
      ctx.Progress(done++, total, definition.name + " " + solution.name);
      const std::string& lang = solution.spec.language;
      std::optional<fib::Evaluation> evaluation;
      std::vector<double> trial_ms, samples_ms;  // the passed trials' medians and timed calls (noise estimate)
      if (lang == "python") {
        std::vector<json> verdicts;
        json sol = ToJson(fib::ToJson(solution));
        for (int64_t t = 0; t < c.trials; ++t) {
          json v = Trial(ctx, c, {{"baseline", baseline}, {"trial", t}, {"role", "solution"}, {"solution", sol},
                                  {"dps", DpsFor(solution, c)}, {"dps_default", DpsDefault(c)},
                                  {"static_checks", c.static_checks}});
          verdicts.push_back(v);
          if (v.value("status", "") != "PASSED") break;
        }
        evaluation = Aggregate(verdicts, ref_ms, env, cpu_text, open["seeds"], &trial_ms, &samples_ms);
      } else if (lang == "cuda" || lang == "cpp") {
        std::string hash = solution.Hash();
        if (!builds.done.count(hash)) {
          fib::CudaBuildOptions options;
          options.arch = c.cuda_arch;
          options.timeout_s = c.timeout_s;
          ctx.Info("building " + solution.name + " with nvcc (" + c.cuda_arch + ")");
          builds.done[hash] = fib::BuildCudaSolution(solution, (stage_dir / "build" / hash.substr(0, 16)).string(), options);
        }
        const fib::CudaBuild& build = builds.done[hash];
        if (build.no_toolkit) {
          not_run.push_back({{"solution", solution.name}, {"workload", workload.uuid}, {"reason", "not built: " + build.log}});
        } else if (!build.ok) {
          evaluation = SimpleEvaluation("COMPILE_ERROR", "Build error: " + build.command + "\n" + build.log +
                                                             "\n[accelopt-host] nvcc " + fib::FindCudaToolkit().version +
                                                             " build for " + c.cuda_arch +
                                                             " failed (run in the build sandbox: the toolkit, the shim and the "
                                                             "sources readable, only the build's out/ writable); not run, not timed",
                                        env);
        } else {
          json probe = ProbeDevice(builds);
          if (!probe.value("device", false)) {
            not_run.push_back({{"solution", solution.name}, {"workload", workload.uuid},
                               {"reason", "built (" + build.library + "); not run: no device (" +
                                              probe.value("message", std::string("no CUDA device")) + ")"}});
          } else {
            json run = ctx.PythonCall(accelopt::api::kFibRunCuda,
                                      {{"baseline", baseline}, {"trials", c.trials}, {"runner", ACCELOPT_FIB_CUDA_RUNNER},
                                       {"library", build.library}, {"symbol", build.symbol},
                                       {"dps", DpsFor(solution, c).is_null() ? json(true) : DpsFor(solution, c)},
                                       {"timeout_s", c.timeout_s}, {"dir", (stage_dir / "run" / hash.substr(0, 16)).string()}});
            std::vector<json> verdicts = run.value("verdicts", json::array()).get<std::vector<json>>();
            std::string text = TimingText(c, open, "CUDA driver API (" + probe.value("name", std::string("GPU")) +
                                                       "), CUDA events around each call, L2 flushed (2 x L2) before it");
            evaluation = Aggregate(verdicts, 0.0, env, text, open["seeds"], &trial_ms, &samples_ms);
            if (evaluation->correctness) evaluation->correctness->extra["timing_method"] = "cuda_events";
            evaluation->environment.hardware = probe.value("name", env.hardware);
          }
        }
      } else if (lang == "triton") {
        json run = ctx.PythonCall(accelopt::api::kFibRunTriton,
                                  {{"baseline", baseline}, {"trials", c.trials}, {"solution", ToJson(fib::ToJson(solution))},
                                   {"dps", DpsFor(solution, c)}, {"dps_default", DpsDefault(c)}, {"timeout_s", c.timeout_s},
                                   {"profile_baseline", c.profile_baseline}});
        if (!run.value("ran", false)) {
          not_run.push_back({{"solution", solution.name}, {"workload", workload.uuid},
                             {"reason", "not run: " + run.value("reason", std::string("no GPU python with torch and triton"))}});
        } else {
          std::vector<json> verdicts = run.value("verdicts", json::array()).get<std::vector<json>>();
          std::string text = TimingText(c, open, "Triton in the GPU machine's python3 (" + run.value("hardware", std::string("GPU")) +
                                                     "), CUDA events around each call, L2 flushed before it");
          evaluation = Aggregate(verdicts, Num(run.value("reference_latency_ms", json(0.0))), env, text, open["seeds"], &trial_ms, &samples_ms);
          if (evaluation->correctness) evaluation->correctness->extra["timing_method"] = "cuda_events";
          if (run.contains("environment")) evaluation->environment = EnvironmentFrom(run["environment"]);
        }
      } else {
        not_run.push_back({{"solution", solution.name}, {"workload", workload.uuid},
                           {"reason", "not run: " + lang + " solutions are not supported by accelopt-host"}});
      }
      if (!evaluation) continue;
      fib::Trace trace;
      trace.definition = definition.name;
      trace.workload = workload;
      trace.solution = solution.name;
      trace.evaluation = *evaluation;
      by_author[solution.author].push_back(trace);
      json row = {{"solution", solution.name},  {"author", solution.author},   {"language", lang},
                  {"workload", workload.uuid},  {"status", evaluation->status}};
      if (evaluation->status != "PASSED" && !evaluation->log.empty()) row["log"] = evaluation->log.substr(0, 2000);
      if (evaluation->performance) {
        row["latency_ms"] = evaluation->performance->latency_ms;
        row["reference_latency_ms"] = evaluation->performance->reference_latency_ms;
        row["speedup_factor"] = evaluation->performance->speedup_factor;
        row["trial_latency_ms"] = trial_ms;
        row["samples_ms"] = samples_ms;
      }
      results.push_back(row);
      ctx.Info(definition.name + " " + workload.uuid.substr(0, 8) + " " + solution.name + ": " + evaluation->status +
               (evaluation->performance ? " " + std::to_string(evaluation->performance->latency_ms) + " ms (x" +
                                              std::to_string(evaluation->performance->speedup_factor) + " vs reference)"
                                        : ""));
    }
    ctx.PythonCall(accelopt::api::kFibCloseWorkload, {{"baseline", baseline}});
  }

  // Traces in FIB's layout: <traces_dir>/<author>/<op_type>/<definition>.jsonl.
  json files = json::array();
  std::string all_lines;
  for (const auto& [author, traces] : by_author) {
    fs::path path, relative;
    try {
      // The names were checked when read; checked again where they become a path.
      relative = fs::path(fib::PathComponent(author, "solution.author")) /
                 fib::PathComponent(definition.op_type, "definition.op_type") /
                 (fib::PathComponent(definition.name, "definition.name") + ".jsonl");
      path = fs::path(traces_dir) / relative;
    } catch (const std::invalid_argument& error) {
      throw accelopt::sdk::StageFailure("config_error", std::string("no trace written: ") + error.what());
    }
    try {
      fib::AppendTraces(traces_dir, relative.string(), traces);  // no link below traces_dir is followed
    } catch (const std::exception& error) {
      throw accelopt::sdk::StageFailure("io_error", error.what());
    }
    files.push_back(path.string());
    for (const auto& t : traces) all_lines += fib::DumpCompact(fib::ToJson(t)) + "\n";
  }
  accelopt::sdk::WriteFile(stage_dir / "traces.jsonl", all_lines);
  json out = {{"ok", true},
              {"definition", definition.name},
              {"op_type", definition.op_type},
              {"baseline_solution", item.value("baseline_solution", json(nullptr))},
              {"results", results},
              {"skipped", skipped},
              {"not_run", not_run},
              {"trace_files", files},
              {"traces", all_lines.empty() ? 0 : std::count(all_lines.begin(), all_lines.end(), '\n')},
              {"environment", ToJson(fib::ToJson(fib::Evaluation{"PASSED", env, "", "", {}, {}})["environment"])}};
  for (const auto& entry : not_run) ctx.Info(definition.name + " " + entry["solution"].get<std::string>() + ": " + entry["reason"].get<std::string>());
  accelopt::sdk::WriteJsonFile(stage_dir / "evaluation.json", out);
  return out;
}

}  // namespace accelopt_fib_plugin
