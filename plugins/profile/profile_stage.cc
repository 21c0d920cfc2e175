// native:profile - correctness on 5 seeds + latency + metrics of one NKI
// kernel, through the Python harness accelopt.profile.profile_kernel
// (backend: the NKI emulator, or neuronxcc on Trainium).
#include <chrono>
#include <filesystem>

#include "accelopt/plugin_sdk.hpp"
#include "profile_stages.h"

using nlohmann::json;
using accelopt::sdk::StageContext;

namespace accelopt_profile {

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
  if (item.contains("values")) request["values"] = item["values"];
  const std::string isolation = ctx.Param<std::string>("isolation");
  if (isolation != "worker" && isolation != "inprocess")
    throw accelopt::sdk::StageFailure("config_error", "isolation must be 'worker' or 'inprocess', got '" + isolation + "'");
  json limits = {{"isolation", isolation}, {"timeout_s", ctx.Param<double>("timeout_s")}};
  if (const int64_t memory_bytes = ctx.Param<int64_t>("memory_bytes"); memory_bytes > 0) limits["memory_bytes"] = memory_bytes;
  auto start = std::chrono::steady_clock::now();
  json result;
  try {
    // Untrusted candidates run in a worker process (docs/isolation.md); the
    // host falls back to in-process when no worker pool is installed.
    result = ctx.IsolatedCall("accelopt.profile", "profile_kernel", request, limits);
  } catch (const accelopt::sdk::StageFailure& failure) {
    if (failure.kind == "config_error") throw;
    // A worker failure that was not folded into a result: report it as the kernel's error.
    result = {{"compiled", false}, {"correct", false}, {"latency_ms", nullptr}, {"estimated", false},
              {"backend", request["backend"]}, {"target", request["target"]}, {"metrics", json::object()},
              {"rel_errors", json::array()},
              {"error", {{"kind", failure.kind}, {"message", failure.what()}, {"traceback", ""}}}};
  }
  double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // % of peak when the problem is one the peak model knows (NKIBench).
  if (result.value("correct", false) && result.contains("latency_ms") && result["latency_ms"].is_number() &&
      item.contains("problem") && !result.contains("percent_of_peak")) {
    try {
      json peak = ctx.PythonCall("accelopt.peak", "describe",
                                 {{"problem", item["problem"]}, {"values", item.value("values", json::object())},
                                  {"latency_ms", result["latency_ms"]}, {"target", request["target"]}});
      if (peak.is_object()) result["peak"] = peak;
    } catch (const accelopt::sdk::StageFailure& failure) {
      ctx.Log(ACCEL_LOG_DEBUG, std::string("no peak model: ") + failure.what());
    }
  }
  result["case"] = item;
  result["wall_s"] = wall_s;
  result["ok"] = result.value("correct", false);
  accelopt::sdk::WriteJsonFile(std::filesystem::path(ctx.StageDir()) / "profile.json", result);
  std::string label = item.value("case_name", std::filesystem::path(kernel).stem().string());
  if (result.value("correct", false)) {
    double latency = result.value("latency_ms", 0.0);
    ctx.Info(label + ": correct, " + std::to_string(latency) + " ms" + (result.value("estimated", false) ? " (estimated)" : ""));
  } else {
    json error = result.value("error", json::object());
    ctx.Warn(label + ": " + (error.is_object() ? error.value("kind", "failed") + ": " + error.value("message", "") : "failed"));
  }
  return result;
}

}  // namespace accelopt_profile
