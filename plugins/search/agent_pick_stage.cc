// native:agent_pick - the agent's planner choice: per active problem the first
// proposed plan (native:plan's order: the rule proposer ranks by the
// profile's bottleneck, i.e. by prior) not yet tried on the current kernel.
// Its text gets the executor's context: the last failure's error feedback,
// then the reflexion block over the last `window` lessons.
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
  const json plans = ListOf(with.value("plans", json()), "plans");
  const int window = ctx.Param<int>("reflexion_window");
  json picked = json::array();
  bool all_done = true;
  for (auto& [case_name, c] : state["cases"].items()) {
    c["picked"] = nullptr;
    if (c.value("done", false)) continue;
    const std::string current = c["current"].value("id", "");
    std::set<std::string> tried;
    for (const auto& t : c["tried"]) tried.insert(t.get<std::string>());
    const json* choice = nullptr;
    for (const auto& plan : plans) {
      if (plan.value("candidate", json::object()).value("case_name", "") != case_name) continue;
      if (plan.value("origin", "") == "rules" && tried.count(current + "|" + PlanKey(plan))) continue;
      choice = &plan;
      break;
    }
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
    c["picked"] = {{"key", current + "|" + PlanKey(*choice)}, {"summary", choice->value("text", "").substr(0, 100)}};
    picked.push_back(plan);
  }
  if (all_done) state["done"] = true;
  return {{"state", state}, {"plans", picked}, {"done", all_done}};
}

}  // namespace accelopt_search
