// native:mcgs_priors - turns the moves proposed for frontier nodes
// (native:plan's plans: accelopt.rules.propose in rules mode, LLM moves of the
// vocabulary otherwise) into the nodes' edges-to-be with priors:
//   weight = base x tactic factor, normalized over the node's kept moves;
//   base   = the plan's own `prior` when it has one, else (prior: profile) the
//            per-engine bottleneck model's weight of what the move relieves
//            (accelopt.search.bottleneck.weigh on the node's profile; 1/(1+rank)
//            when the profile has no busy figures), 1/(1+rank) (prior: rank) or 1
//            (prior: uniform);
//   tactic factor = 2 (improved+1)/(n+2) from the tactic statistics of (rule,
//            bottleneck of the node) (1 without statistics; tactic_weight 0 disables);
// a move whose predicted gain is below min_pred_gain is kept as "pruned"
// (expanded only when nothing else is left). The predicted gain is
// exp(mean log gain) - 1 of the move's statistics on the node's own problem
// (prune_scope: problem; every problem's with prune_scope: all) once they hold
// tactic_min_count evaluations: a move that did nothing on other kernels may
// still be the one this kernel needs. The
// proposer's own `predicted_gain` (an estimate from the profile, no
// measurement) counts only with prune_predicted, else it is just recorded.
// An LLM move whose kind is not in the vocabulary (the plan's move_error) is
// kept as an "invalid" edge with its error and never expanded.
// Every move records its kind (the rule), its params and, once executed, its diff.
#include <map>

#include "search_stages.h"

namespace accelopt_search {

json RunMcgsPriors(StageContext& ctx) {
  const json& with = ctx.With();
  json graph = GraphParam(ctx);
  const json plans = ListParam(with.value("plans", json()), "plans");
  const json frontier = ListParam(with.value("frontier", json()), "frontier");
  PriorRule prior_rule;
  const std::string prior_mode = ctx.Param<std::string>("prior");
  prior_rule.uniform = prior_mode == "uniform";
  prior_rule.tactic_weight = ctx.Param<double>("tactic_weight");
  prior_rule.tactic_min_count = ctx.Param<int>("tactic_min_count");
  prior_rule.prune_predicted = ctx.Param<bool>("prune_predicted");
  prior_rule.prune_across_problems = ctx.Param<std::string>("prune_scope") == "all";
  const double min_gain = ctx.Param<double>("min_pred_gain");
  const json& tactics = graph["tactics"];

  std::map<std::pair<std::string, std::string>, std::vector<json>> by_node;
  for (const auto& plan : plans) {
    const json candidate = plan.value("candidate", json::object());
    by_node[{candidate.value("case_name", ""), candidate.value("search_node", "")}].push_back(plan);
  }
  // The bottleneck model's weights, one Python call for every frontier node (prior: profile).
  std::map<std::pair<std::string, std::string>, json> model;  // (case, node) -> {"model", "weights"}
  if (prior_mode == "profile") {
    json request = {{"nodes", json::array()}};
    std::vector<std::pair<std::string, std::string>> keys;
    for (const auto& member : frontier) {
      const std::pair<std::string, std::string> key{member.value("case_name", ""), member.value("search_node", "")};
      json moves = json::array();
      for (const auto& plan : by_node[key]) moves.push_back({{"relieves", plan.value("relieves", json::object())}});
      request["nodes"].push_back({{"metrics", member.value("metrics", json::object())}, {"peak", member.value("peak", json())},
                                  {"moves", moves}});
      keys.push_back(key);
    }
    if (!keys.empty()) {
      json reply = ctx.PythonCall(accelopt::api::kBottleneckWeigh, request);
      const json nodes = reply.value("nodes", json::array());
      for (size_t i = 0; i < keys.size() && i < nodes.size(); ++i) model[keys[i]] = nodes[i];
    }
  }
  int attached = 0, pruned = 0, refused = 0;
  for (const auto& member : frontier) {
    const std::string case_name = member.value("case_name", "");
    const std::string id = member.value("search_node", "");
    if (!graph["cases"].contains(case_name) || !graph["cases"][case_name]["nodes"].contains(id)) continue;
    json& node = graph["cases"][case_name]["nodes"][id];
    if (node.value("moves_ready", false)) continue;
    const std::string bottleneck = node.value("bottleneck", "unknown");
    const std::string problem = graph["cases"][case_name].value("case", json::object()).value("problem", "");
    const auto& proposed = by_node[{case_name, id}];
    const json node_model = model.count({case_name, id}) ? model[{case_name, id}] : json::object();
    const json profile_weights = node_model.value("weights", json::array());
    if (node_model.contains("model") && node_model["model"].is_object()) node["profile_model"] = node_model["model"];
    json moves = json::array();
    std::vector<double> weights;
    std::vector<size_t> kept;
    for (size_t r = 0; r < proposed.size(); ++r) {
      const json& plan = proposed[r];
      auto text_field = [&](const char* key) {
        return plan.contains(key) && plan[key].is_string() ? plan[key].get<std::string>() : std::string();
      };
      const bool refused_kind = plan.contains("move_error") && plan["move_error"].is_object();
      // The move kind keys the tactic statistics: the rule, an LLM move's vocabulary kind, else its origin.
      std::string rule = text_field("rule");
      if (rule.empty() && !refused_kind) rule = text_field("kind");
      if (rule.empty()) rule = plan.value("origin", "llm");
      const std::optional<double> estimate = Number(plan, "predicted_gain");
      std::optional<double> own_prior = Number(plan, "prior");
      if (!own_prior && r < profile_weights.size() && profile_weights[r].is_number()) own_prior = profile_weights[r].get<double>();
      const json entry = TacticEntry(tactics, rule, bottleneck);
      const MoveWeight mw = WeighMove(r, own_prior, entry, PredictionStats(entry, problem, prior_rule), estimate, prior_rule);
      const double weight = mw.weight;
      const std::optional<double> predicted = mw.predicted;
      const std::string rule_plan = plan.value("rule_plan_id", std::string());
      json move = {{"id", rule_plan.empty() ? plan.value("plan_id", std::string()) : rule_plan},
                   {"rule", rule},
                   {"title", plan.value("title", "")},
                   {"text", plan.value("text", "")},
                   {"origin", plan.value("origin", "rules")},
                   {"prior", 0.0},
                   {"weight", weight},
                   {"predicted_gain", predicted ? json(*predicted) : (estimate ? json(*estimate) : json())},
                   {"state", "untried"},
                   {"child", nullptr},
                   {"n", 0}};
      move["kind"] = refused_kind ? json(text_field("kind")) : json(rule);
      move["params"] = plan.value("params", json::object());
      if (plan.contains("rule")) move["rule_plan_id"] = plan.value("rule_plan_id", "");
      for (const char* key : {"effect", "relieves", "matched"}) {
        if (plan.contains(key)) move[key] = plan[key];
      }
      if (refused_kind) {
        move["state"] = "invalid";
        move["error"] = plan["move_error"];
        ++refused;
        AddEvent(graph, {{"type", "invalid"}, {"case", case_name}, {"node", id}, {"move", move.value("id", "")},
                         {"reason", plan["move_error"].value("kind", "unknown_move") + ": " +
                                        plan["move_error"].value("message", "").substr(0, 200)}});
      } else if (predicted && *predicted < min_gain) {
        move["state"] = "pruned";
        ++pruned;
      } else {
        kept.push_back(moves.size());
        weights.push_back(weight);
      }
      moves.push_back(move);
    }
    const std::vector<double> priors = Normalize(weights);
    for (size_t j = 0; j < kept.size(); ++j) moves[kept[j]]["prior"] = priors[j];
    attached += static_cast<int>(kept.size());
    node["moves"] = moves;
    node["moves_ready"] = true;
    json summary = json::array();
    for (const auto& m : moves) summary.push_back({{"id", m["id"]}, {"prior", m["prior"]}, {"state", m["state"]}});
    AddEvent(graph, {{"type", "moves"}, {"case", case_name}, {"node", id}, {"bottleneck", bottleneck}, {"moves", summary}});
  }
  ctx.Info(std::to_string(attached) + " moves attached to " + std::to_string(frontier.size()) + " node(s)" +
           (pruned ? ", " + std::to_string(pruned) + " pruned below the minimum predicted gain" : "") +
           (refused ? ", " + std::to_string(refused) + " refused (move kind not in the vocabulary)" : ""));
  return {{"graph", graph}, {"frontier", json::array()}, {"moves", attached}, {"pruned", pruned}, {"refused", refused}};
}

}  // namespace accelopt_search
