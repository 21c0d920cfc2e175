// native:profile - correctness on 5 seeds + latency + metrics of one NKI
// kernel, through the Python harness accelopt.profile.profile_kernel
// (backend: the NKI emulator, or neuronxcc on Trainium); with screen_seeds,
// screen-then-confirm (screening.h).
#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>

#include "accelopt/plugin_sdk.hpp"
#include "profile_stages.h"
#include "screening.h"

using nlohmann::json;
using accelopt::sdk::StageContext;

namespace accelopt_profile {
namespace {

// True the first time `problem` is seen in this process: a missing peak model
// is said once per problem, not once per candidate.
bool FirstNoPeak(const std::string& problem) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  return warned.insert(problem).second;
}

}  // namespace

json RunProfile(StageContext& ctx) {
  // Every default comes from the stage's schema (plugin.cc, kProfileParams).
  const json item = ctx.Param<json>("case");
  const std::string kernel = ctx.Param<std::string>("kernel");
  json request = {{"kernel", kernel},
                  {"reference", ctx.Param<std::string>("reference")},
                  {"backend", ctx.Param<std::string>("backend")},
                  {"target", ctx.Param<std::string>("target")},
                  {"rel_tol", ctx.Param<double>("rel_tol")},
                  {"seeds", ctx.Param<json>("seeds")},
                  {"timing", ctx.Param<bool>("timing")}};
  if (item.contains("problem")) request["problem"] = item["problem"];
  const int64_t hidden_reuse = ctx.Param<int64_t>("hidden_reuse");
  if (hidden_reuse < 1 || hidden_reuse > 64)
    throw accelopt::sdk::StageFailure("config_error", "hidden_reuse must be in 1..64, got " + std::to_string(hidden_reuse));
  if (hidden_reuse > 1) request["hidden_reuse"] = hidden_reuse;
  if (item.contains("values")) request["values"] = item["values"];
  const std::string isolation = ctx.Param<std::string>("isolation");
  if (isolation != "worker" && isolation != "inprocess")
    throw accelopt::sdk::StageFailure("config_error", "isolation must be 'worker' or 'inprocess', got '" + isolation + "'");
  json limits = {{"isolation", isolation}, {"timeout_s", ctx.Param<double>("timeout_s")},
                 {"static_checks", ctx.Param<bool>("static_checks")}};
  if (const int64_t memory_bytes = ctx.Param<int64_t>("memory_bytes"); memory_bytes > 0) limits["memory_bytes"] = memory_bytes;
  ScreenPlan plan;
  plan.screen_seeds = static_cast<int>(ctx.Param<int64_t>("screen_seeds"));
  // Only the trusted side of an isolated call has a hidden input set to screen on.
  plan.hidden_only = ctx.Param<bool>("screen_hidden_only") && isolation == "worker";
  if (plan.screen_seeds < 0)
    throw accelopt::sdk::StageFailure("config_error", "screen_seeds must be >= 0, got " + std::to_string(plan.screen_seeds));
  const json below = ctx.With().value("confirm_below_ms", json());
  if (below.is_number()) {
    plan.confirm_below_ms = below.get<double>();
  } else if (!below.is_null()) {
    throw accelopt::sdk::StageFailure("config_error", "confirm_below_ms must be a number of ms or null, got " + below.dump());
  }
  if (!request["seeds"].is_array() || request["seeds"].empty())
    throw accelopt::sdk::StageFailure("config_error", "seeds must be a non-empty list, got " + request["seeds"].dump());
  // One isolated profile call (screen, confirm or full); a worker failure that was
  // not folded into a result is reported as the kernel's error.
  auto call = [&](const json& call_request) -> json {
    try {
      // Untrusted candidates run in a worker process (docs/isolation.md); the
      // host falls back to in-process when no worker pool is installed.
      return ctx.IsolatedCall(accelopt::api::kNkiProfile, call_request, limits);
    } catch (const accelopt::sdk::StageFailure& failure) {
      if (failure.kind == "config_error") throw;
      return {{"compiled", false}, {"correct", false}, {"latency_ms", nullptr}, {"estimated", false},
              {"backend", call_request["backend"]}, {"target", call_request["target"]}, {"metrics", json::object()},
              {"rel_errors", json::array()},
              {"error", {{"kind", failure.kind}, {"message", failure.what()}, {"traceback", ""}}}};
    }
  };
  auto start = std::chrono::steady_clock::now();
  json result = ScreenThenConfirm(request, plan, call);
  double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // % of peak: the reference's peak_work() or the built-in NKIBench formulas
  // (accelopt.peak); a problem with neither is said once, never a silent "-".
  if (result.value("correct", false) && result.contains("latency_ms") && result["latency_ms"].is_number() &&
      item.contains("problem") && !result.contains("percent_of_peak")) {
    try {
      json peak = ctx.PythonCall(accelopt::api::kPeakDescribe,
                                 {{"problem", item["problem"]}, {"values", item.value("values", json::object())},
                                  {"latency_ms", result["latency_ms"]}, {"target", request["target"]},
                                  {"reference", request["reference"]}});
      if (peak.is_object()) result["peak"] = peak;
    } catch (const accelopt::sdk::StageFailure& failure) {
      result["peak_error"] = failure.what();
      const std::string problem = item["problem"].is_string() ? item["problem"].get<std::string>() : item["problem"].dump();
      if (FirstNoPeak(problem)) ctx.Warn("no % of peak for problem '" + problem + "': " + failure.what());
    }
  }
  result["case"] = item;
  result["wall_s"] = wall_s;
  result["ok"] = result.value("correct", false);
  accelopt::sdk::WriteJsonFile(std::filesystem::path(ctx.StageDir()) / "profile.json", result);
  std::string label = item.value("case_name", std::filesystem::path(kernel).stem().string());
  if (result.value("correct", false)) {
    double latency = result.value("latency_ms", 0.0);
    ctx.Info(label + ": correct, " + std::to_string(latency) + " ms" + (result.value("estimated", false) ? " (estimated)" : "") +
             (result["validation"] == "full" ? "" : ", " + result["validation"].get<std::string>()));
  } else {
    json error = result.value("error", json::object());
    ctx.Warn(label + ": " + (error.is_object() ? error.value("kind", "failed") + ": " + error.value("message", "") : "failed"));
  }
  return result;
}

}  // namespace accelopt_profile
