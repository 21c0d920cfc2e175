// native:render_prompts - the dry run of the LLM stages: the planner, executor,
// fixer and summarizer prompts for one kernel, rendered with the same builders
// the stages use (prompt_data.h), without calling a model. `accelopt-host
// prompts render` runs it (docs/cli.md); the prompt snapshot tests compare the
// stages' real requests with it.
#include <filesystem>

#include "prompt_data.h"
#include "stages.h"

namespace fs = std::filesystem;

namespace accelopt_optimize {
namespace {

constexpr const char* kPlaceholderPlan =
    "PLAN: (dry run) the plan chosen by a planner\n"
    "(The planner's reply goes here: the inefficiency it found and the concrete change.)";
constexpr const char* kPlaceholderError = "(dry run) the error report of the failed kernel goes here";

bool Correct(const json& other) {
  return other.is_object() && other.value("correct", false) && Number(other, "latency_ms").value_or(0) > 0;
}

}  // namespace

json RunRenderPrompts(StageContext& ctx) {
  const json& with = ctx.With();
  const json member = with.at("candidate");
  const json memory = with.value("memory", json());
  const json other = with.value("other", json());
  const std::string plan_text = with.value("plan", "").empty() ? kPlaceholderPlan : with.value("plan", "");
  Prompts prompts(with.value("prompts", ""), with.value("target", ""));
  const std::string parent_source = ReadText(member.value("kernel", ""));
  const std::string other_source = other.is_object() && other.contains("kernel") ? ReadText(other["kernel"].get<std::string>()) : "";
  json rendered = json::array();
  auto add = [&](const std::string& stage, const std::string& system, const std::string& user) {
    WriteText(fs::path(ctx.StageDir()) / (stage + "_system.md"), system);
    WriteText(fs::path(ctx.StageDir()) / (stage + "_user.md"), user);
    rendered.push_back({{"stage", stage}, {"system", system}, {"user", user}});
  };

  // Planner: plan 1 of N, with the memory's visible experiences.
  json planner = PlannerData(WithLaunchCost(ctx, member), memory, prompts.Data("metrics.json"), with.value("max_experiences", 16),
                             std::max<int>(1, with.value("plans_per_candidate", 12)));
  planner["plan_number"] = 1;
  add("planner", prompts.Render("planner_system", planner), prompts.Render("planner_user", planner));

  // Executor: the given (or a placeholder) plan applied to the candidate.
  const json plan = {{"plan_id", "b0p0"}, {"title", PlanTitle(plan_text)}, {"text", plan_text}, {"candidate", member}};
  add("executor", prompts.Render("executor_system", json::object()), prompts.Render("executor_user", ExecutorData(plan, parent_source)));

  // Fixer: the other kernel with its error when it failed, else a placeholder error.
  json failed = member;
  failed["error"] = {{"kind", "compile_error"}, {"message", kPlaceholderError}, {"traceback", ""}};
  std::string failed_source = other_source.empty() ? parent_source : other_source;
  if (other.is_object() && !Correct(other) && other.value("error", json()).is_object()) failed["error"] = other["error"];
  add("fixer", prompts.Render("fixer_system", json::object()), prompts.Render("fixer_user", FixerData(failed, failed_source)));

  // Summarizer: candidate vs the other kernel oriented slow -> fast with the measured
  // speedup, else the candidate against itself with a placeholder speedup.
  json record = member;
  record["plan"] = {{"title", PlanTitle(plan_text)}};
  json summarizer;
  const auto parent_ms = Number(member, "latency_ms");
  if (Correct(other) && parent_ms && *parent_ms > 0) {
    const double s = *parent_ms / other["latency_ms"].get<double>();
    const bool regression = s < 1.0;
    summarizer = SummarizerData(record, regression ? other_source : parent_source, regression ? parent_source : other_source,
                                regression ? 1.0 / s : s, regression);
  } else {
    summarizer = SummarizerData(record, parent_source, parent_source, 1.0, false);
    summarizer["speedup"] = "(dry run: the measured speedup)";
  }
  add("summarizer", prompts.Render("summarizer_system", json::object()), prompts.Render("summarizer_user", summarizer));

  ctx.Info("rendered " + std::to_string(rendered.size()) + " prompt pairs into " + ctx.StageDir());
  return {{"prompts", rendered}};
}

}  // namespace accelopt_optimize
