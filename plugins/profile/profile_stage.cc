// native:profile - correctness on 5 seeds + latency + metrics of one NKI
// kernel, through the Python harness accelopt.profile.profile_kernel
// (backend: the NKI emulator, or neuronxcc on Trainium).
#include <chrono>
#include <filesystem>
#include <fstream>

#include "accelopt/plugin_sdk.hpp"
#include "profile_stages.h"

using nlohmann::json;
using accelopt::sdk::StageContext;

namespace accelopt_profile {

json RunProfile(StageContext& ctx) {
  const json& with = ctx.With();
  const json item = with.value("case", json::object());
  json request = {{"kernel", with.at("kernel")},
                  {"reference", with.at("reference")},
                  {"backend", with.value("backend", "auto")},
                  {"target", with.value("target", "trn1")},
                  {"rel_tol", with.value("rel_tol", 2e-5)},
                  {"seeds", with.value("seeds", json::array({0, 21, 42, 63, 84}))},
                  {"timing", with.value("timing", true)}};
  if (item.contains("problem")) request["problem"] = item["problem"];
  if (item.contains("values")) request["values"] = item["values"];
  const std::string isolation = with.value("isolation", "worker");
  if (isolation != "worker" && isolation != "inprocess")
    throw accelopt::sdk::StageFailure("config_error", "isolation must be 'worker' or 'inprocess', got '" + isolation + "'");
  json limits = {{"isolation", isolation}, {"timeout_s", with.value("timeout_s", 300.0)}};
  if (with.value("memory_bytes", 0.0) > 0) limits["memory_bytes"] = with["memory_bytes"];
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
  std::ofstream(std::filesystem::path(ctx.StageDir()) / "profile.json") << result.dump(2) << "\n";
  std::string label = item.value("case_name", std::filesystem::path(with.at("kernel").get<std::string>()).stem().string());
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
