// native:agent_pick - the agent's planner choice: per active problem the first
// proposed plan (native:plan's order: the rule proposer ranks by the
// profile's bottleneck, i.e. by prior) not yet tried on the current kernel.
// Its text gets the executor's context: the last failure's error feedback,
// then the reflexion block over the last `window` lessons. A rule move whose
// lesson on the current kernel says to avoid it (a regression or an error of
// the same rule kind from this kernel) is skipped.
#include <set>

#include "agent_stages.h"

namespace accelopt_search {

std::string PlanKey(const json& plan) {
  const std::string rule = plan.value("rule_plan_id", std::string());
  return rule.empty() ? plan.value("title", plan.value("plan_id", "")) : rule;
}

json RunAgentPick(StageContext& ctx) {
  const json& with = ctx.With();
  json state = with.value("state", json());
  if (!state.is_object() || !state.contains("cases")) throw StageFailure("config_error", "`state` must come from native:agent_init");
  const json plans = ListParam(with.value("plans", json()), "plans");
  const int window = ctx.Param<int>("reflexion_window");
  json picked = json::array();
  bool all_done = true;
  // A problem whose LLM spend cap (or the run's) is reached is done: its search is over, with
  // the cap as the reason (docs/llm.md, "Spend caps"), instead of asking round after round.
  std::vector<std::string> running;
  for (const auto& [case_name, c] : state["cases"].items()) {
    if (!c.value("done", false)) running.push_back(case_name);
  }
  const auto stopped = ctx.LlmStopped(ctx.Param<std::string>("llm"), running);
  for (auto& [case_name, c] : state["cases"].items()) {
    c["picked"] = nullptr;
    if (c.value("done", false)) continue;
    if (auto it = stopped.find(case_name); it != stopped.end()) {
      c["done"] = true;
      c["done_reason"] = it->second;
      ctx.Info(case_name + ": search stopped: " + it->second);
      continue;
    }
    const std::string current = c["current"].value("id", "");
    std::set<std::string> tried;
    for (const auto& t : c["tried"]) tried.insert(t.get<std::string>());
    const json* choice = nullptr;
    int avoided = 0;
    for (const auto& plan : plans) {
      if (plan.value("candidate", json::object()).value("case_name", "") != case_name) continue;
      if (plan.value("origin", "") == "rules") {
        if (tried.count(current + "|" + PlanKey(plan))) continue;
        // Rules mode follows the lessons: a move kind that regressed or failed on this
        // kernel is not tried on it again, at another site or with other parameters.
        if (AvoidedOnNode(c["lessons"], current, plan.value("rule", ""))) {
          ++avoided;
          continue;
        }
      }
      choice = &plan;
      break;
    }
    if (avoided > 0) ctx.Info(case_name + ": " + std::to_string(avoided) + " proposal(s) skipped: a lesson says to avoid their move on this kernel");
    if (!choice) {
      c["done"] = true;
      c["done_reason"] = "no untried move for the current kernel";
      ctx.Info(case_name + ": no untried move left; stopping");
      continue;
    }
    all_done = false;
    json plan = *choice;
    const std::string context = ErrorFeedback(c.value("experiments", json::array())) + RenderReflexion(c["lessons"], window);
    if (!context.empty()) plan["text"] = plan.value("text", "") + "\n\n" + context;
    plan["plan_id"] = "a" + plan.value("plan_id", std::string("p"));
    plan["attempt_text"] = choice->value("text", "");  // the plan without the context (native:reflect's prompt)
    c["picked"] = {{"key", current + "|" + PlanKey(*choice)}, {"summary", choice->value("text", "").substr(0, 100)},
                   {"node", current}, {"move", choice->value("origin", "") == "rules" ? choice->value("rule", "") : ""}};
    picked.push_back(plan);
  }
  if (all_done) state["done"] = true;
  return {{"state", state}, {"plans", picked}, {"done", all_done}};
}

}  // namespace accelopt_search
