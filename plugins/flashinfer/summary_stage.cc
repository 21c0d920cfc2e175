// native:fib_summary - per definition: solutions, statuses, best speedup vs the
// reference and vs the `baseline` author (FIB's score, flashinfer-facts §1.6); writes
// summary.json and summary.txt, and with write_back appends the run's traces
// to the trace set as FIB's run_all does (docs/flashinfer.md).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "common.h"
#include "stages.h"

namespace accelopt_fib_plugin {
namespace fs = std::filesystem;
namespace {

using accelopt::sdk::Fixed;

json Summarize(const json& result) {
  std::map<std::string, json> per;  // solution -> row
  std::vector<std::string> order;
  // solution -> uuid -> latency (PASSED), and failures
  std::map<std::string, std::map<std::string, double>> latency;
  std::set<std::string> failed;
  for (const auto& r : result.value("results", json::array())) {
    std::string name = r.value("solution", "");
    if (!per.count(name)) {
      order.push_back(name);
      per[name] = {{"solution", name}, {"author", r.value("author", "")}, {"language", r.value("language", "")},
                   {"statuses", json::object()}, {"workloads", 0}};
    }
    json& row = per[name];
    std::string status = r.value("status", "?");
    row["statuses"][status] = row["statuses"].value(status, 0) + 1;
    row["workloads"] = row["workloads"].get<int>() + 1;
    if (status == "PASSED") {
      latency[name][r.value("workload", "")] = r.value("latency_ms", 0.0);
      double s = r.value("speedup_factor", 0.0);
      row["best_speedup_vs_reference"] = std::max(row.value("best_speedup_vs_reference", 0.0), s);
      row["sum_speedup"] = row.value("sum_speedup", 0.0) + s;
      row["passed"] = row.value("passed", 0) + 1;
    } else {
      failed.insert(name);
    }
  }
  std::string baseline = result.value("baseline_solution", json(nullptr)).is_string() ? result["baseline_solution"].get<std::string>() : "";
  json solutions = json::array();
  double best_ref = 0, best_base = 0;
  bool have_base = false;
  for (const auto& name : order) {
    json row = per[name];
    int passed = row.value("passed", 0);
    if (passed) row["mean_speedup_vs_reference"] = row.value("sum_speedup", 0.0) / passed;
    row.erase("sum_speedup");
    best_ref = std::max(best_ref, row.value("best_speedup_vs_reference", 0.0));
    if (!baseline.empty() && latency.count(baseline) && name != baseline) {
      double score = 0;
      int n = 0;
      if (!failed.count(name)) {
        for (const auto& [uuid, ms] : latency[name]) {
          auto b = latency[baseline].find(uuid);
          if (b != latency[baseline].end() && ms > 0) {
            score += b->second / ms;
            ++n;
          }
        }
      }
      row["score_vs_baseline"] = n ? score / n : 0.0;
      best_base = std::max(best_base, row["score_vs_baseline"].get<double>());
      have_base = true;
    }
    solutions.push_back(row);
  }
  return {{"definition", result.value("definition", "")},
          {"op_type", result.value("op_type", "")},
          {"baseline_solution", baseline.empty() ? json(nullptr) : json(baseline)},
          {"solutions", solutions},
          // null when no solution passed: nothing was evaluated, which is not a speedup of 0
          {"best_speedup_vs_reference", best_ref > 0 ? json(best_ref) : json(nullptr)},
          {"best_score_vs_baseline", have_base ? json(best_base) : json(nullptr)},
          {"not_run", result.value("not_run", json::array())},
          {"skipped", result.value("skipped", json::array())}};
}

}  // namespace

json RunFibSummary(accelopt::sdk::StageContext& ctx) {
  json results = ctx.Param<json>("results");
  if (!results.is_array()) results = json::array();
  fs::path out_dir = ctx.OptionalParam<std::string>("out_dir").value_or(ctx.RunDir());
  json definitions = json::array();
  std::map<std::string, int> statuses;
  int not_run = 0, traces = 0;
  std::ostringstream text;
  text << "FlashInfer-Bench evaluation (speedup = reference latency / solution latency; score = FIB's mean "
          "baseline/solution ratio, 0 if any trace failed)\n\n";
  for (const auto& r : results) {
    if (!r.is_object() || !r.contains("definition")) continue;
    json s = Summarize(r);
    traces += r.value("traces", 0);
    text << s["definition"].get<std::string>() << " (" << s["op_type"].get<std::string>() << ")\n";
    for (const auto& row : s["solutions"]) {
      std::string st;
      for (auto it = row["statuses"].begin(); it != row["statuses"].end(); ++it) {
        st += (st.empty() ? "" : ", ") + it.key() + " " + std::to_string(it.value().get<int>());
        statuses[it.key()] += it.value().get<int>();
      }
      text << "  " << row["solution"].get<std::string>() << " [" << row["author"].get<std::string>() << ", "
           << row["language"].get<std::string>() << "]: " << st;
      if (row.contains("mean_speedup_vs_reference"))
        text << "; speedup vs reference mean x" << Fixed(row["mean_speedup_vs_reference"].get<double>()) << ", best x"
             << Fixed(row["best_speedup_vs_reference"].get<double>());
      if (row.contains("score_vs_baseline")) text << "; vs baseline x" << Fixed(row["score_vs_baseline"].get<double>());
      text << "\n";
    }
    // One line per solution not run (with how many workloads), not one per workload.
    std::vector<std::pair<std::string, std::string>> not_run_order;  // (solution, reason), first seen first
    std::map<std::pair<std::string, std::string>, int> not_run_count;
    for (const auto& n : s["not_run"]) {
      ++not_run;
      auto key = std::make_pair(n.value("solution", ""), n.value("reason", ""));
      if (not_run_count[key]++ == 0) not_run_order.push_back(key);
    }
    for (const auto& key : not_run_order) {
      const int n = not_run_count[key];
      std::string reason = key.second;
      if (reason.rfind("not run: ", 0) == 0) reason = reason.substr(9);
      text << "  " << key.first << ": not run on " << n << " workload" << (n == 1 ? "" : "s") << ": " << reason << "\n";
    }
    for (const auto& k : s["skipped"]) text << "  workload " << k.value("workload", "") << " skipped: " << k.value("reason", "") << "\n";
    if (s["best_speedup_vs_reference"].is_number())
      text << "  best speedup vs reference x" << Fixed(s["best_speedup_vs_reference"].get<double>());
    else
      text << "  best speedup vs reference: none evaluated (no solution passed)";
    if (s["best_score_vs_baseline"].is_number()) text << "; best vs baseline x" << Fixed(s["best_score_vs_baseline"].get<double>());
    text << "\n\n";
    definitions.push_back(std::move(s));
  }
  std::string totals;
  for (const auto& [status, n] : statuses) totals += (totals.empty() ? "" : ", ") + status + " " + std::to_string(n);
  text << "traces: " << traces << (totals.empty() ? "" : " (" + totals + ")") << "; not run: " << not_run << "\n";

  json written_back = json::array();
  if (ctx.Param<bool>("write_back")) {
    std::string root = ctx.Param<std::string>("trace_set");
    if (root.empty()) throw accelopt::sdk::StageFailure("config_error", "write_back needs trace_set");
    fib::LoadOptions options;
    fib::TraceSet set = fib::LoadTraceSet(root, options);
    for (const auto& r : results) {
      if (!r.is_object()) continue;
      const fib::Definition* d = set.FindDefinition(r.value("definition", ""));
      if (d == nullptr) continue;
      for (const auto& file : r.value("trace_files", json::array())) {
        std::ifstream in(file.get<std::string>());
        std::string line;
        std::map<std::string, std::vector<fib::Trace>> by_author;
        while (std::getline(in, line)) {
          if (line.empty()) continue;
          fib::Problems problems;
          auto t = fib::ParseTrace(fib::ojson::parse(line, nullptr, false), file.get<std::string>(), &problems);
          if (!t || !t->solution) continue;
          const fib::Solution* s = set.FindSolution(*t->solution);
          by_author[s ? s->author : "unknown"].push_back(*t);
        }
        for (const auto& [author, list] : by_author) {
          fs::path target, relative;
          try {
            relative = set.TracePath(author, *d);
            target = fs::path(set.root) / relative;
          } catch (const std::invalid_argument& error) {
            throw accelopt::sdk::StageFailure("config_error", std::string("write_back: ") + error.what());
          }
          fib::AppendTraces(set.root, relative.string(), list);  // no link below the trace set is followed
          written_back.push_back(target.string());
        }
      }
    }
    text << "written back into " << root << ": " << written_back.size() << " file(s)\n";
  }
  json summary = {{"definitions", definitions}, {"statuses", statuses}, {"traces", traces}, {"not_run", not_run},
                  {"written_back", written_back}};
  accelopt::sdk::WriteJsonFile(out_dir / "summary.json", summary);
  accelopt::sdk::WriteFile(out_dir / "summary.txt", text.str());
  ctx.Info("\n" + text.str());
  summary["text"] = text.str();
  summary["summary_json"] = (out_dir / "summary.json").string();
  return summary;
}

}  // namespace accelopt_fib_plugin
