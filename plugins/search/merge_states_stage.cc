// native:mcgs_merge_states - the executed moves meet the graph: each new
// kernel's canonical state hash (accelopt.search.canon) is looked up; a known
// state makes the move an edge to that node (a transposition in MCGS's sense,
// two move orders reaching one state; no evaluation), a new one becomes a
// pending node and goes on to native:profile. `mcgs_transpose` is the stage's
// former name, kept so that older pipelines run (with a warning): "transpose"
// read as a matrix transpose in a field full of them.
// Moves that produced no kernel (a refused rule, no code block) are dropped; a
// move whose reply repeated an evaluated kernel even after the re-ask naming it
// ("converged") finishes its node: the node's untried moves are not asked for.
#include <map>

#include "search_stages.h"

namespace accelopt_search {

json RunMcgsMergeStates(StageContext& ctx) {
  const json& with = ctx.With();
  json graph = GraphParam(ctx);
  const json executed = with.value("execute", json());
  const json candidates = ListParam(executed, "candidates");
  const json failures = ListParam(executed, "failures");
  // (case, plan id) -> index into the case's pending list
  std::map<std::pair<std::string, std::string>, size_t> pending;
  for (auto& [case_name, cg] : graph["cases"].items()) {
    for (size_t i = 0; i < cg["pending"].size(); ++i) pending[{case_name, cg["pending"][i].value("plan_id", "")}] = i;
  }
  auto find = [&](const json& record) -> json* {
    const std::string case_name = record.value("case_name", "");
    const std::string plan_id = record.value("plan", json::object()).value("plan_id", "");
    auto it = pending.find({case_name, plan_id});
    return it == pending.end() ? nullptr : &graph["cases"][case_name]["pending"][it->second];
  };
  int invalid = 0, transpositions = 0;
  json merged = json::array();  // the new kernels, then the repeats that kept their kernel
  for (const auto& c : candidates) merged.push_back(c);
  for (const auto& failure : failures) {
    json* p = find(failure);
    if (!p) continue;
    if (failure.value("error", json::object()).value("kind", "") == "repeat" && failure.contains("kernel")) {
      merged.push_back(failure);  // a repeat of a known state: merged below (a transposition)
      continue;
    }
    const std::string case_name = failure.value("case_name", "");
    json& move = graph["cases"][case_name]["nodes"][(*p)["node"].get<std::string>()]["moves"][(*p)["move"].get<int>()];
    const json error = failure.value("error", json::object());
    move["state"] = "invalid";
    move["error"] = error;
    if (failure.contains("reply_diff")) move["reply_diff"] = failure["reply_diff"];  // the diff that did not apply
    (*p)["outcome"] = "invalid";
    ++invalid;
    AddEvent(graph, {{"type", "invalid"}, {"case", case_name}, {"node", (*p)["node"]}, {"move", move.value("id", "")},
                     {"reason", error.value("kind", "error") + ": " + error.value("message", "").substr(0, 200)}});
  }
  // The state keys native:execute got with the new source (rules.apply, edits.resolve); only the
  // kernels without one are hashed from their files here.
  std::vector<std::string> hashes(merged.size());
  std::vector<std::string> paths;
  std::vector<size_t> unhashed;
  for (size_t i = 0; i < merged.size(); ++i) {
    const json& c = merged[i];
    if (c.contains("state_hash") && c["state_hash"].is_string() && !c["state_hash"].get<std::string>().empty()) {
      hashes[i] = c["state_hash"];
    } else {
      paths.push_back(c.value("kernel", ""));
      unhashed.push_back(i);
    }
  }
  const std::vector<std::string> from_files = StateHashes(ctx, paths);
  for (size_t k = 0; k < unhashed.size(); ++k) hashes[unhashed[k]] = from_files[k];
  json out = json::array();
  for (size_t i = 0; i < merged.size(); ++i) {
    json candidate = merged[i];
    if (candidate.value("status", "") == "failed") {  // a repeat: a candidate again should its state be new
      for (const char* key : {"status", "error", "latency_ms", "speedup", "speedup_vs_baseline"}) candidate.erase(key);
    }
    json* p = find(candidate);
    if (!p) {
      ctx.Warn(candidate.value("id", "") + ": no pending selection for this candidate; ignored");
      continue;
    }
    const std::string case_name = candidate.value("case_name", "");
    json& cg = graph["cases"][case_name];
    const std::string node = (*p)["node"];
    const int index = (*p)["move"];
    const std::string hash = hashes[i].empty() ? candidate.value("source_hash", candidate.value("id", "")) : hashes[i];
    Merge merge = MergeState(cg, node, index, hash, NodeFieldsFrom(candidate));
    json& move = cg["nodes"][node]["moves"][index];
    move["candidate"] = candidate.value("id", "");
    if (candidate.contains("diff")) move["diff"] = candidate["diff"];
    if (candidate.contains("edit")) move["edit"] = candidate["edit"];  // rule | diff | source
    if (candidate.contains("patch_error")) move["patch_error"] = candidate["patch_error"];
    if (merge.self_loop) {
      (*p)["outcome"] = "invalid";
      ++invalid;
      AddEvent(graph, {{"type", "invalid"}, {"case", case_name}, {"node", node}, {"move", move.value("id", "")},
                       {"reason", "unchanged: the kernel is its parent's state"}});
    } else if (!merge.created) {
      (*p)["outcome"] = "transposition";
      (*p)["child"] = merge.child;
      ++transpositions;
      AddEvent(graph, {{"type", "transposition"}, {"case", case_name}, {"node", node}, {"move", move.value("id", "")},
                       {"child", merge.child}, {"hash", hash}});
    } else {
      (*p)["outcome"] = "new";
      (*p)["child"] = merge.child;
      candidate["search_node"] = merge.child;
      candidate["state_hash"] = hash;
      AddEvent(graph, {{"type", "candidate"}, {"case", case_name}, {"node", node}, {"move", move.value("id", "")},
                       {"candidate", candidate.value("id", "")}, {"child", merge.child}, {"hash", hash}});
      out.push_back(candidate);
    }
  }
  for (const auto& failure : failures) {
    json* p = find(failure);
    if (!p) continue;
    const std::string case_name = failure.value("case_name", "");
    if (failure.value("converged", false)) {
      // The model answered a re-ask naming a repeat with the repeat again (docs/search.md,
      // "Re-asks"): asking it about this node's other moves would repeat it again, so the
      // node is finished: its untried and pruned moves become invalid.
      json& node = graph["cases"][case_name]["nodes"][(*p)["node"].get<std::string>()];
      int closed = 0;
      for (auto& other : node["moves"]) {
        const std::string state = other.value("state", "");
        if (state != "untried" && state != "pruned") continue;
        other["state"] = "invalid";
        other["error"] = {{"kind", "converged"}, {"message", "not tried: the model converged on this node (" +
                                                                  failure.value("repeat_of", std::string("a repeat")) + ")"}};
        ++closed;
      }
      node["converged"] = true;
      AddEvent(graph, {{"type", "converged"}, {"case", case_name}, {"node", (*p)["node"]}, {"moves_closed", closed},
                       {"reason", "the reply repeated " + failure.value("repeat_of", std::string("an evaluated kernel")) +
                                      " after a re-ask naming the repeat"}});
    }
  }
  ctx.Info(std::to_string(out.size()) + " new state(s) to evaluate" +
           (transpositions ? ", " + std::to_string(transpositions) + " transposition(s)" : "") +
           (invalid ? ", " + std::to_string(invalid) + " move(s) dropped" : ""));
  return {{"graph", graph}, {"candidates", out}, {"transpositions", transpositions}, {"invalid", invalid}};
}

json RunMcgsTransposeDeprecated(StageContext& ctx) {
  ctx.Warn("native:mcgs_transpose is the former name of native:mcgs_merge_states; use the new name");
  return RunMcgsMergeStates(ctx);
}

}  // namespace accelopt_search
