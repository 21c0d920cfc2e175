// plugins/search/agent_core.cc - see agent_core.h.
#include "agent_core.h"

#include <cmath>
#include <cstdio>

namespace accelopt_search {
namespace {

std::string Fmt(double value, const char* format) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

std::string Marker(const std::string& category) {
  if (category == "improved") return "[+]";
  if (category == "regression") return "[-]";
  if (category == "error") return "[x]";
  if (category == "no_improvement") return "[=]";
  return "[ ]";
}

}  // namespace

std::optional<double> Divergence(double latency, double best) {
  if (!std::isfinite(best) || !(best > 0)) return std::nullopt;
  return (latency - best) / best * 100.0;
}

bool ShouldRevert(double latency, double best, double threshold) {
  auto d = Divergence(latency, best);
  return d && *d > threshold;
}

Outcome Judge(bool ok, double latency, double best_before, double threshold, const std::string& error_kind) {
  Outcome out;
  if (!ok) {
    static const char* kCompile[] = {"compile_error", "runtime_error", "timeout", "crash", "out_of_memory", "rule_error",
                                     "no_code_block", "unchanged", "stage_error"};
    out.status = "correctness_fail";
    for (const char* kind : kCompile) {
      if (error_kind == kind) out.status = "compile_fail";
    }
    if (error_kind == "no_code_block") return out;  // nothing was tried: no lesson
    out.category = "error";
    out.lesson = out.status == "compile_fail" ? "failed to compile or run (" + error_kind + ")" : "accuracy failed (" + error_kind + ")";
    return out;
  }
  const std::string numbers = "(" + Fmt(latency, "%.5f") + " vs " + Fmt(best_before, "%.5f") + " ms)";
  if (!std::isfinite(best_before) || latency < best_before) {
    out.status = "improved";
    out.keep = out.new_best = true;
    out.category = "improved";
    out.lesson = std::isfinite(best_before) ? "improved " + Fmt((best_before - latency) / best_before * 100.0, "%.1f") + "% " + numbers
                                            : "first correct kernel (" + Fmt(latency, "%.5f") + " ms)";
    return out;
  }
  if (ShouldRevert(latency, best_before, threshold)) {
    out.status = "divergence_revert";
    out.category = "regression";
    out.lesson = "caused " + Fmt(*Divergence(latency, best_before), "%.1f") + "% regression " + numbers + "; reverted to the best";
    return out;
  }
  out.status = "no_improvement";
  out.keep = true;  // a correct kernel within the threshold is the next round's starting point
  out.category = "no_improvement";
  out.lesson = "no improvement " + numbers;
  return out;
}

json Lesson(int64_t round, const std::string& text, const std::string& category, const std::string& plan) {
  return {{"round", round}, {"lesson", text}, {"category", category}, {"plan_summary", plan.substr(0, 100)}};
}

bool AvoidedOnNode(const json& lessons, const std::string& node, const std::string& move) {
  if (move.empty() || !lessons.is_array()) return false;
  for (const auto& l : lessons) {
    if (!l.is_object()) continue;
    const std::string category = l.value("category", "");
    if ((category == "regression" || category == "error") && l.value("node", "") == node && l.value("move", "") == move) return true;
  }
  return false;
}

std::string RenderReflexion(const json& lessons, int window) {
  if (!lessons.is_array() || lessons.empty() || window <= 0) return "";
  const size_t start = lessons.size() > static_cast<size_t>(window) ? lessons.size() - window : 0;
  std::string out = "Lessons from the last rounds (reflexion):\n";
  std::vector<std::string> avoid, build_on;
  for (size_t i = start; i < lessons.size(); ++i) {
    const json& l = lessons[i];
    const std::string category = l.value("category", "neutral");
    const std::string plan = l.value("plan_summary", "");
    out += "- " + Marker(category) + " round " + std::to_string(l.value("round", 0)) + ": " + l.value("lesson", "") +
           (plan.empty() ? "" : " (plan: " + plan + ")") + "\n";
    if ((category == "regression" || category == "error") && avoid.size() < 3 && !plan.empty()) avoid.push_back(plan);
    if (category == "improved" && build_on.size() < 3 && !plan.empty()) build_on.push_back(plan);
  }
  if (!avoid.empty()) {
    out += "Avoid:\n";
    for (const auto& p : avoid) out += "- " + p + "\n";
  }
  if (!build_on.empty()) {
    out += "Build on:\n";
    for (const auto& p : build_on) out += "- " + p + "\n";
  }
  return out;
}

std::string ErrorFeedback(const json& experiments) {
  if (!experiments.is_array() || experiments.empty()) return "";
  const json& last = experiments.back();
  const std::string status = last.value("status", "");
  if (status != "compile_fail" && status != "correctness_fail") return "";
  const std::string error = last.contains("error") && last["error"].is_string() ? last["error"].get<std::string>() : "";
  if (error.empty()) return "";
  return "The previous attempt failed:\n" + error.substr(0, 500) +
         "\nFix this error in your new kernel and do not repeat it.\n";
}

}  // namespace accelopt_search
