// native:mcgs_init - the search state of a Monte-Carlo graph search: one
// graph per problem whose root is the baseline kernel (keyed by its
// canonical state hash), the tactic statistics of earlier runs, and the
// roots as the first frontier (nodes that still need moves).
#include <filesystem>

#include "search_stages.h"

namespace fs = std::filesystem;

namespace accelopt_search {

json LoadTactics(const std::string& path) {
  json empty = {{"version", 1}, {"entries", json::object()}};
  if (path.empty()) return empty;
  json loaded = json::parse(ReadText(path), nullptr, false);
  if (!loaded.is_object() || !loaded.contains("entries") || !loaded["entries"].is_object()) {
    throw StageFailure("config_error", "tactics file " + path + " is not a tactics.json of an earlier search (no `entries` object)");
  }
  return loaded;
}

json RunMcgsInit(StageContext& ctx) {
  const json& with = ctx.With();
  const json beam = ListParam(with.value("beam", json()), "beam");
  json graph = {{"version", 1}, {"round", 0}, {"done", false}, {"events", 0}, {"pending_events", json::array()},
                {"tactics", LoadTactics(with.value("tactics", std::string()))}, {"cases", json::object()}};
  std::vector<std::string> paths;
  for (const auto& member : beam) paths.push_back(member.value("kernel", ""));
  const std::vector<std::string> hashes = StateHashes(ctx, paths);
  json frontier = json::array();
  for (size_t i = 0; i < beam.size(); ++i) {
    const json& member = beam[i];
    const std::string case_name = member.value("case_name", "");
    const auto latency = Number(member, "latency_ms");
    if (case_name.empty() || !latency || *latency <= 0) continue;
    json fixed = {{"case_name", case_name}};
    // The problem's constant fields: an NKIBench case's (problem, values, task, rel_tol) or a
    // FlashInfer-Bench definition's (item: definition, workloads; the baseline's repeats).
    for (const char* key : {"problem", "case_id", "values", "task", "rel_tol", "baseline_latency_ms", "item", "baseline_trials_ms",
                            "baseline_samples_ms"}) {
      if (member.contains(key)) fixed[key] = member[key];
    }
    fixed["baseline_latency_ms"] = member.value("baseline_latency_ms", *latency);
    json root = NodeFieldsFrom(member);
    root.update({{"id", "n0"}, {"hash", hashes[i]}, {"status", "ok"}, {"latency_ms", *latency},
                 {"speedup_vs_baseline", 1.0}, {"value", 0.0}, {"N", 1}, {"W", 0.0}, {"depth", 0}, {"parent", nullptr},
                 {"bottleneck", Bottleneck(member.value("metrics", json::object()))}, {"moves_ready", false},
                 {"moves", json::array()}});
    graph["cases"][case_name] = {{"case", fixed}, {"root", "n0"}, {"next_id", 1}, {"evaluations", 0}, {"incumbent", "n0"},
                                 {"done", false}, {"pending", json::array()}, {"nodes", {{"n0", root}}}};
    json entry = member;
    entry["search_node"] = "n0";
    frontier.push_back(entry);
    AddEvent(graph, {{"type", "root"}, {"case", case_name}, {"node", "n0"}, {"hash", hashes[i]}, {"latency_ms", *latency},
                     {"bottleneck", root["bottleneck"]}});
  }
  graph["done"] = graph["cases"].empty();
  ctx.Info("graph search over " + std::to_string(graph["cases"].size()) + " problem(s); " +
           std::to_string(graph["tactics"]["entries"].size()) + " tactic statistics loaded");
  return {{"graph", graph}, {"frontier", frontier}};
}

}  // namespace accelopt_search
