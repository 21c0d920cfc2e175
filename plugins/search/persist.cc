// The search's files in the run directory, rewritten atomically after every
// evaluation: search_graph.json (the whole state), events.jsonl (every search
// event, in order), trace.md (the same events as a narrative) and
// tactics.json. events.jsonl is rebuilt from its first graph.events lines, so
// a stage that runs again after kill -9 + `run --resume` writes the same file.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "search_stages.h"

namespace fs = std::filesystem;

namespace accelopt_search {
namespace {

std::string Str(const json& e, const char* key) {
  if (!e.contains(key)) return "";
  return e[key].is_string() ? e[key].get<std::string>() : e[key].dump();
}

std::string Num(const json& e, const char* key, int digits) {
  return e.contains(key) && e[key].is_number() ? Fixed(e[key].get<double>(), digits) : "?";
}

}  // namespace

std::string RenderTrace(const std::vector<json>& events) {
  std::ostringstream md;
  md << "# Monte-Carlo graph search trace\n\n"
        "Every event of events.jsonl, by round: selections (the path from the root and the move "
        "expanded), candidates and their results, transpositions, incumbents.\n";
  int64_t round = -1;
  for (const auto& e : events) {
    const int64_t r = e.value("round", int64_t{0});
    if (r != round) {
      round = r;
      md << "\n## Round " << round << "\n\n";
    }
    const std::string type = Str(e, "type");
    const std::string c = "**" + Str(e, "case") + "**";
    if (type == "root") {
      md << "- " << c << " root " << Str(e, "node") << " (state " << Str(e, "hash") << "): baseline " << Num(e, "latency_ms", 5)
         << " ms, bottleneck " << Str(e, "bottleneck") << "\n";
    } else if (type == "moves") {
      md << "- " << c << " moves of " << Str(e, "node") << ":";
      for (const auto& m : e.value("moves", json::array())) {
        md << " `" << Str(m, "id") << "` " << Num(m, "prior", 3) << (m.value("state", "") == "pruned" ? " (pruned)" : "") << ";";
      }
      if (e.value("moves", json::array()).empty()) md << " none (leaf)";
      md << "\n";
    } else if (type == "select") {
      std::string path;
      for (const auto& n : e.value("path", json::array())) path += (path.empty() ? "" : " → ") + n.get<std::string>();
      md << "- " << c << " select " << path << ", expand `" << Str(e, "move") << "` (prior " << Num(e, "prior", 3) << "): "
         << Str(e, "title") << "\n";
    } else if (type == "transposition") {
      md << "- " << c << " transposition: `" << Str(e, "move") << "` of " << Str(e, "node") << " reaches " << Str(e, "child")
         << " (same state " << Str(e, "hash") << "); no evaluation\n";
    } else if (type == "invalid") {
      md << "- " << c << " move `" << Str(e, "move") << "` of " << Str(e, "node") << " dropped: " << Str(e, "reason") << "\n";
    } else if (type == "candidate") {
      md << "- " << c << " candidate " << Str(e, "candidate") << " → new state " << Str(e, "child") << " (" << Str(e, "hash") << ")\n";
    } else if (type == "evaluate") {
      md << "- " << c << " " << Str(e, "node") << " (" << Str(e, "candidate") << "): ";
      if (e.value("status", "") == "ok") {
        md << Num(e, "latency_ms", 5) << " ms, " << Num(e, "speedup_vs_baseline", 3) << "x vs baseline, "
           << Num(e, "speedup_vs_parent", 3) << "x vs parent";
      } else {
        md << "failed (" << Str(e, "error_kind") << ")";
      }
      md << ", value " << Num(e, "value", 4) << ", evaluations " << Str(e, "evaluations") << "\n";
    } else if (type == "incumbent") {
      md << "- " << c << " **new incumbent** " << Str(e, "node") << ": " << Num(e, "latency_ms", 5) << " ms, "
         << Num(e, "speedup_vs_baseline", 3) << "x\n";
    } else if (type == "done") {
      md << "- " << c << " search done: " << Str(e, "reason") << "\n";
    } else {
      md << "- " << c << " " << type << "\n";
    }
  }
  return md.str();
}

void PersistSearch(const fs::path& dir, json& graph) {
  const int64_t kept = graph.value("events", int64_t{0});
  std::vector<json> events;
  {
    std::ifstream in(dir / "events.jsonl");
    for (std::string line; static_cast<int64_t>(events.size()) < kept && std::getline(in, line);) {
      json e = json::parse(line, nullptr, false);
      if (!e.is_discarded()) events.push_back(e);
    }
  }
  for (const auto& e : graph.value("pending_events", json::array())) events.push_back(e);
  graph["events"] = static_cast<int64_t>(events.size());
  graph["pending_events"] = json::array();
  std::string lines;
  for (const auto& e : events) lines += e.dump() + "\n";
  WriteText(dir / "events.jsonl", lines);
  WriteText(dir / "trace.md", RenderTrace(events));
  WriteJson(dir / "tactics.json", graph.value("tactics", json::object()));
  WriteJson(dir / "search_graph.json", graph);
}

}  // namespace accelopt_search
