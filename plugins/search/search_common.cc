#include "search_common.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace accelopt_search {

void WriteText(const fs::path& path, const std::string& text) { accelopt::sdk::WriteFile(path, text); }

void WriteJson(const fs::path& path, const json& value) { accelopt::sdk::WriteJsonFile(path, value, 2); }

std::vector<std::string> StateHashes(StageContext& ctx, const std::vector<std::string>& paths) {
  std::vector<std::string> out(paths.size());
  if (paths.empty()) return out;
  json reply = ctx.PythonCall(accelopt::api::kCanonStateHashes, {{"paths", paths}});
  const json hashes = reply.value("hashes", json::array());
  for (size_t i = 0; i < out.size() && i < hashes.size(); ++i) {
    if (hashes[i].is_string()) out[i] = hashes[i];
  }
  return out;
}

json MemberOf(const json& case_graph, const std::string& id) {
  json member = case_graph.value("case", json::object());
  const json& node = case_graph["nodes"][id];
  for (const char* key : {"kernel", "latency_ms", "speedup_vs_baseline", "lineage", "history", "origin", "iteration", "solution",
                          "samples_ms", "trials_ms"}) {
    if (node.contains(key)) member[key] = node[key];
  }
  member["id"] = node.value("candidate", id);
  member["parent"] = node.value("parent_candidate", json());
  member["search_node"] = id;
  return member;
}

json NodeFieldsFrom(const json& record) {
  json fields = json::object();
  // solution: a FlashInfer-Bench candidate's FIB Solution; samples_ms, trials_ms: a timed
  // record's repeats (the noise a new incumbent must beat, accelopt/sdk/noise.hpp).
  for (const char* key : {"kernel", "lineage", "history", "origin", "iteration", "solution", "samples_ms", "trials_ms"}) {
    if (record.contains(key)) fields[key] = record[key];
  }
  fields["candidate"] = record.value("id", "");
  fields["parent_candidate"] = record.value("parent", json());
  if (record.contains("plan") && record["plan"].is_object()) fields["title"] = record["plan"].value("title", "");
  return fields;
}

std::string Bottleneck(const json& metrics) {
  if (!metrics.is_object()) return "unknown";
  if (metrics.contains("bottleneck") && metrics["bottleneck"].is_string()) return metrics["bottleneck"];
  const json busy = metrics.value("engine_busy_ms", json::object());
  std::string best = "unknown";
  double most = 0;
  if (busy.is_object()) {
    for (const auto& [engine, ms] : busy.items()) {
      if (ms.is_number() && ms.get<double>() > most) {
        most = ms.get<double>();
        best = engine;
      }
    }
  }
  return best;
}

void AddEvent(json& graph, json event) {
  if (!graph.contains("pending_events") || !graph["pending_events"].is_array()) graph["pending_events"] = json::array();
  event["round"] = graph.value("round", 0);
  graph["pending_events"].push_back(std::move(event));
}

json GraphParam(StageContext& ctx) {
  json graph = ctx.With().value("graph", json());
  if (!graph.is_object() || !graph.contains("cases") || !graph["cases"].is_object()) {
    throw StageFailure("config_error", "`graph` must be the search state from native:mcgs_init (an object with `cases`)");
  }
  return graph;
}

}  // namespace accelopt_search
