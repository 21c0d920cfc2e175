// native:mcgs_select - one round of leaf selection per problem: up to
// `workers` selections (evaluations in flight, kept apart by virtual loss)
// while the problem's budget of evaluations lasts; each selection becomes
// a plan for native:execute (the move's rule plan, or its LLM plan text).
// A problem with no live move left but budget to spend revives its pruned
// moves (revive_pruned) before it is declared exhausted.
#include "search_stages.h"

namespace accelopt_search {

json RunMcgsSelect(StageContext& ctx) {
  const json& with = ctx.With();
  json graph = GraphParam(ctx);
  const SearchParams params = ParamsFrom(with);
  const int64_t round = with.value("iteration", int64_t{0});
  const int64_t seed = with.value("seed", int64_t{0});
  const bool revive_pruned = ctx.Param<bool>("revive_pruned");
  graph["round"] = round;
  json plans = json::array();
  bool all_done = true;
  // A problem whose LLM spend cap (or the run's) is reached is done (docs/llm.md, "Spend caps").
  std::vector<std::string> running;
  for (const auto& [case_name, cg] : graph["cases"].items()) {
    if (!cg.value("done", false)) running.push_back(case_name);
  }
  const auto stopped = ctx.LlmStopped(ctx.Param<std::string>("llm"), running);
  for (auto& [case_name, cg] : graph["cases"].items()) {
    // Pending moves of an earlier round that never came back (a stage failed) are tried again.
    for (auto& [id, node] : cg["nodes"].items()) {
      for (auto& move : node["moves"]) {
        if (move.value("state", "") == "pending") move["state"] = "untried";
      }
    }
    cg["pending"] = json::array();
    if (cg.value("done", false)) continue;
    if (auto it = stopped.find(case_name); it != stopped.end()) {
      cg["done"] = true;
      cg["done_reason"] = "spend_cap";
      cg["stop_reason"] = it->second;
      AddEvent(graph, {{"type", "done"}, {"case", case_name}, {"reason", it->second}});
      ctx.Info(case_name + ": search stopped: " + it->second);
      continue;
    }
    const int remaining = params.budget - cg.value("evaluations", 0);
    if (remaining <= 0) {
      cg["done"] = true;
      cg["done_reason"] = "budget";
      AddEvent(graph, {{"type", "done"}, {"case", case_name}, {"reason", "budget of " + std::to_string(params.budget) + " evaluations used"}});
      continue;
    }
    auto selections = SelectLeaves(cg, params, DeriveSeed(seed, round, case_name), std::min(params.workers, remaining));
    if (selections.empty() && Exhausted(cg) && revive_pruned) {
      // Pruned moves are deferred, not dropped: with budget left they are the best untried ones.
      const int revived = RevivePruned(cg);
      if (revived > 0) {
        AddEvent(graph, {{"type", "revive"}, {"case", case_name}, {"moves", revived},
                         {"reason", "no live move left after " + std::to_string(cg.value("evaluations", 0)) +
                                        " evaluations: " + std::to_string(revived) + " pruned move(s) revived"}});
        ctx.Info(case_name + ": " + std::to_string(revived) + " pruned move(s) revived (no live move left, " +
                 std::to_string(remaining) + " evaluations of the budget left)");
        selections = SelectLeaves(cg, params, DeriveSeed(seed, round, case_name), std::min(params.workers, remaining));
      }
    }
    if (selections.empty() && Exhausted(cg)) {
      cg["done"] = true;
      cg["done_reason"] = "exhausted";
      AddEvent(graph, {{"type", "done"}, {"case", case_name},
                       {"reason", "no move left to expand after " + std::to_string(cg.value("evaluations", 0)) + " evaluations"}});
      continue;
    }
    all_done = false;
    for (const auto& sel : selections) {
      const json& move = cg["nodes"][sel.node]["moves"][sel.move];
      const std::string plan_id = sel.node + "m" + std::to_string(sel.move);
      json plan = {{"plan_id", plan_id},     {"index", sel.move},
                   {"title", move.value("title", "")}, {"text", move.value("text", move.value("title", ""))},
                   {"origin", move.value("origin", "rules")}, {"candidate", MemberOf(cg, sel.node)}};
      if (move.contains("rule_plan_id")) {
        plan["rule"] = move["rule"];
        plan["rule_plan_id"] = move["rule_plan_id"];
        plan["params"] = move.value("params", json::object());
      } else if (move.contains("kind") && move["kind"].is_string()) {  // an LLM move of the vocabulary
        plan["kind"] = move["kind"];
        plan["params"] = move.value("params", json::object());
        if (move.contains("effect")) plan["effect"] = move["effect"];
      }
      plans.push_back(plan);
      cg["pending"].push_back({{"plan_id", plan_id}, {"path", sel.path}, {"node", sel.node}, {"move", sel.move}, {"prior", sel.prior}});
      AddEvent(graph, {{"type", "select"}, {"case", case_name}, {"path", sel.path}, {"node", sel.node},
                       {"move", move.value("id", "")}, {"title", move.value("title", "")}, {"prior", sel.prior},
                       {"steps", sel.steps}});
    }
  }
  graph["done"] = all_done;
  // What the problems not done may still evaluate (this round's selections included):
  // the progress line's budget, so a problem that ran out of moves is not waited for.
  int64_t budget_left = 0;
  for (const auto& [case_name, cg] : graph["cases"].items())
    if (!cg.value("done", false)) budget_left += std::max(0, params.budget - cg.value("evaluations", 0));
  ctx.Info("round " + std::to_string(round) + ": " + std::to_string(plans.size()) + " move(s) selected" +
           (all_done ? "; every problem is done" : ""));
  return {{"graph", graph}, {"plans", plans}, {"selected", plans.size()}, {"done", all_done}, {"budget_left", budget_left}};
}

}  // namespace accelopt_search
