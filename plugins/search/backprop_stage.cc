// native:mcgs_backprop - the evaluated states come back: each new node gets
// its value (log speedup over the problem's baseline; a failed candidate gets
// fail_value), the value and a visit are backed up along the path that
// selected it, the incumbent (best correct kernel) and the tactic statistics
// are updated, and the search's files are rewritten after every evaluation.
// Only a kernel checked on every seed (validation full or confirmed) becomes
// the incumbent: a screened one is a search state like any other, never a
// result (native:profile's confirm_below_ms is the incumbent's latency, so a
// screened kernel is one that could not have become the incumbent).
// New correct nodes form the next frontier (they need moves).
#include <cmath>
#include <map>

#include "accelopt/sdk/noise.hpp"
#include "search_stages.h"

namespace accelopt_search {
namespace {

json AsMember(json record) {
  for (const char* key : {"status", "error", "compiled", "correct", "fix_attempts", "diff", "parent_kernel"}) record.erase(key);
  return record;
}

}  // namespace

json RunMcgsBackprop(StageContext& ctx) {
  const json& with = ctx.With();
  json graph = GraphParam(ctx);
  const SearchParams params = ParamsFrom(with);
  const double confidence = ctx.Param<double>("confidence");
  if (!(confidence > 0 && confidence < 1)) throw StageFailure("config_error", "confidence must be in (0, 1)");
  const json records = ListParam(with.value("records", json()), "records");
  json best = with.value("best", json::object());
  if (!best.is_object()) best = json::object();
  std::map<std::pair<std::string, std::string>, json> by_node;
  for (const auto& record : records) {
    if (record.contains("search_node") && record["search_node"].is_string()) {
      by_node[{record.value("case_name", ""), record["search_node"].get<std::string>()}] = record;
    }
  }
  json frontier = json::array();
  int evaluated = 0;
  bool all_done = true;
  for (auto& [case_name, cg] : graph["cases"].items()) {
    const double baseline = cg["case"].value("baseline_latency_ms", 0.0);
    for (const auto& p : cg["pending"]) {
      if (p.value("outcome", "") != "new") continue;
      const std::string id = p["child"];
      json& node = cg["nodes"][id];
      auto it = by_node.find({case_name, id});
      json record = it != by_node.end() ? it->second
                                        : json({{"status", "failed"}, {"error", {{"kind", "missing_result"}, {"message", "no profile result came back"}}}});
      const bool ok = record.value("status", "") == "ok" && Number(record, "latency_ms").value_or(0) > 0;
      const double latency = ok ? record["latency_ms"].get<double>() : 0.0;
      const double value = Value(ok, latency, baseline, params.fail_value);
      const json& parent = cg["nodes"][p["node"].get<std::string>()];
      const double parent_latency = parent.value("latency_ms", 0.0);
      node["status"] = ok ? "ok" : "failed";
      node["value"] = value;
      node["latency_ms"] = ok ? json(latency) : json();
      node["speedup_vs_baseline"] = ok ? json(baseline / latency) : json();
      node["bottleneck"] = ok ? Bottleneck(record.value("metrics", json::object())) : "failed";
      node["validation"] = record.value("validation", "full");
      for (const char* key : {"samples_ms", "trials_ms"})  // a timed record's repeats: the noise the next incumbent must beat
        if (ok && record.contains(key)) node[key] = record[key];
      if (!ok) {
        node["error"] = {{"kind", record.value("error", json::object()).value("kind", "error")},
                         {"message", record.value("error", json::object()).value("message", "").substr(0, 500)}};
        node["moves_ready"] = true;  // a failed state is a leaf
      }
      std::vector<std::string> path = p["path"].get<std::vector<std::string>>();
      path.push_back(id);
      Backpropagate(cg, path, value);
      cg["evaluations"] = cg.value("evaluations", 0) + 1;
      ++evaluated;
      const json& move = parent["moves"][p["move"].get<int>()];
      RecordTactic(graph["tactics"], move.value("rule", "llm"), parent.value("bottleneck", "unknown"),
                   cg["case"].value("problem", ""), ok, ok && latency > 0 ? parent_latency / latency : 0.0);
      json event = {{"type", "evaluate"}, {"case", case_name}, {"node", id}, {"candidate", record.value("id", node.value("candidate", ""))},
                    {"status", ok ? "ok" : "failed"}, {"value", value}, {"evaluations", cg["evaluations"]}, {"path", path},
                    {"validation", node["validation"]}};
      if (ok) {
        event["latency_ms"] = latency;
        event["speedup_vs_baseline"] = baseline / latency;
        event["speedup_vs_parent"] = parent_latency > 0 ? json(parent_latency / latency) : json();
        json member = AsMember(record);
        member["search_node"] = id;
        frontier.push_back(member);
      } else {
        event["error_kind"] = node["error"]["kind"];
      }
      AddEvent(graph, event);
      const std::string incumbent = cg.value("incumbent", "n0");
      bool beats = ok && BeatsIncumbent(latency, cg["nodes"][incumbent].value("latency_ms", 1e300), params.min_gain);
      std::string noise;
      if (beats && !accelopt::sdk::BeyondNoise(cg["nodes"][incumbent], record, confidence, &noise)) {
        // A timed kernel (FlashInfer-Bench) whose gain is within its measured noise: a search
        // state like any other, never the result (docs/optimize.md, "Noise-aware speedups").
        beats = false;
        node["noise_vs_incumbent"] = noise;
        AddEvent(graph, {{"type", "within_noise"}, {"case", case_name}, {"node", id}, {"latency_ms", latency}, {"noise", noise}});
        ctx.Info(case_name + ": " + id + " is faster than the incumbent " + incumbent + " but not beyond the measured noise (" + noise +
                 "); the incumbent stays");
      }
      if (beats && !ValidatedForResult(record)) {
        ctx.Warn(case_name + ": " + id + " is faster than the incumbent but was only screened (not confirmed); "
                 "it does not become the incumbent (is confirm_below_ms the incumbent's latency?)");
      } else if (beats) {
        cg["incumbent"] = id;
        json member = AsMember(record);
        member["search_node"] = id;
        best[case_name] = member;
        AddEvent(graph, {{"type", "incumbent"}, {"case", case_name}, {"node", id}, {"latency_ms", latency},
                         {"speedup_vs_baseline", baseline / latency}});
        ctx.Info(case_name + ": new incumbent " + id + " (" + record.value("id", "") + ") at " + Fixed(baseline / latency) + "x");
      }
      if (cg["evaluations"].get<int>() >= params.budget && !cg.value("done", false)) {
        cg["done"] = true;
        cg["done_reason"] = "budget";
        AddEvent(graph, {{"type", "done"}, {"case", case_name},
                         {"reason", "budget of " + std::to_string(params.budget) + " evaluations used"}});
      }
      PersistSearch(ctx.RunDir(), graph);  // one consistent state per evaluation
    }
    cg["pending"] = json::array();
    if (!cg.value("done", false)) all_done = false;
  }
  graph["done"] = all_done;
  PersistSearch(ctx.RunDir(), graph);
  json next = json::array();  // a problem that is done needs no more moves
  for (const auto& member : frontier) {
    if (!graph["cases"][member.value("case_name", "")].value("done", false)) next.push_back(member);
  }
  frontier = next;
  json summary = json::object();
  for (const auto& [case_name, cg] : graph["cases"].items()) {
    const json& inc = cg["nodes"][cg.value("incumbent", "n0")];
    summary[case_name] = {{"evaluations", cg["evaluations"]}, {"nodes", cg["nodes"].size()}, {"incumbent", cg["incumbent"]},
                          {"speedup_vs_baseline", inc.value("speedup_vs_baseline", json(1.0))}, {"done", cg["done"]}};
  }
  ctx.Info(std::to_string(evaluated) + " evaluation(s) backed up" + (all_done ? "; search done" : ""));
  return {{"graph", graph}, {"best", best}, {"frontier", frontier}, {"evaluated", evaluated}, {"done", all_done},
          {"summary", summary}};
}

}  // namespace accelopt_search
