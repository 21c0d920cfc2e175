#include "cli/runs_command.h"

#include <algorithm>
#include <iostream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/text_table.h"
#include "python/interpreter.h"
#include "report/run_index.h"
#include "report/run_summary.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace accelopt::cli {
namespace {

// Opens `root`'s index and brings it up to date (Python starts only when a run must be summarized).
std::unique_ptr<report::RunIndex> OpenSynced(const fs::path& root, bool rebuild, std::string* error) {
  if (!fs::is_directory(root)) {
    *error = root.string() + " is not a folder of runs (give --root DIR)";
    return nullptr;
  }
  std::unique_ptr<report::RunIndex> index;
  try {
    index = std::make_unique<report::RunIndex>(report::IndexFile(root));
    std::vector<std::string> problems;
    auto summarize = [](const fs::path& dir) {
      python::Initialize();
      return report::SummarizeRun(dir);
    };
    auto stats = report::SyncIndex(*index, root, summarize, rebuild, &problems);
    for (const auto& problem : problems) spdlog::warn("runs: skipped {}", problem);
    if (stats.added || stats.updated || stats.removed) {
      spdlog::debug("runs index {}: {} added, {} updated, {} removed", report::IndexFile(root).string(), stats.added,
                    stats.updated, stats.removed);
    }
  } catch (const std::exception& error_) {
    *error = "cannot use the run index " + report::IndexFile(root).string() + ": " + error_.what();
    return nullptr;
  }
  return index;
}

std::string Started(const std::string& iso) {
  std::string text = iso;
  std::replace(text.begin(), text.end(), 'T', ' ');
  if (!text.empty() && text.back() == 'Z') text.pop_back();
  return text;
}

std::string Geomean(const report::IndexedRun& run) { return Number(run.geomean_speedup, 4, "x"); }

}  // namespace

std::optional<report::IndexedRun> FindRun(const std::string& reference, const fs::path& root, std::string* error) {
  if (fs::is_regular_file(fs::path(reference) / "run.json")) {
    try {
      python::Initialize();
      return report::SummarizeRun(reference);
    } catch (const std::exception& failure) {
      *error = failure.what();
      return std::nullopt;
    }
  }
  auto index = OpenSynced(root, false, error);
  if (!index) return std::nullopt;
  if (auto run = index->Find(reference)) return run;
  std::vector<report::IndexedRun> matches;
  for (auto& run : index->List()) {
    if (run.id.rfind(reference, 0) == 0) matches.push_back(run);
  }
  if (matches.size() == 1) return matches.front();
  if (matches.empty()) {
    *error = "no run '" + reference + "' under " + root.string() + " (an id from `accelopt-host runs`, or a run directory)";
  } else {
    *error = "'" + reference + "' names " + std::to_string(matches.size()) + " runs:";
    for (const auto& run : matches) *error += " " + run.id;
  }
  return std::nullopt;
}

int RunsCommand(const RunsOptions& options) {
  std::string error;
  auto index = OpenSynced(options.root, options.rebuild, &error);
  if (!index) {
    std::cerr << "error: " << error << "\n";
    return kExitUsage;
  }
  auto runs = index->List();
  if (options.json) {
    json list = json::array();
    for (const auto& run : runs) list.push_back(run.ToJson());
    std::cout << list.dump(2) << "\n";
    return kExitOk;
  }
  if (runs.empty()) {
    std::cout << "no runs under " << options.root << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& run : runs) {
    rows.push_back({run.id, run.name, Started(run.started_at), run.status, Duration(run.duration_s), Geomean(run), run.kind});
  }
  std::cout << FormatTable({"ID", "PIPELINE", "STARTED (UTC)", "STATUS", "DURATION", "GEOMEAN", "KIND"}, rows, {4, 5});
  return kExitOk;
}

int RunsShowCommand(const RunsOptions& options, const std::string& id) {
  std::string error;
  auto found = FindRun(id, options.root, &error);
  if (!found) {
    std::cerr << "error: " << error << "\n";
    return kExitUsage;
  }
  const report::IndexedRun& run = *found;
  if (options.json) {
    std::cout << run.ToJson().dump(2) << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> facts = {
      {"run", run.id}, {"dir", run.dir}, {"pipeline", run.name + " (" + run.pipeline + ")"}, {"kind", run.kind},
      {"status", run.status}, {"started", Started(run.started_at)}, {"finished", Started(run.finished_at)},
      {"duration", Duration(run.duration_s)}, {"geomean", Geomean(run)},
      {"candidates", run.candidates ? std::to_string(*run.candidates) : "-"},
      {"report", run.report.empty() ? "(none: accelopt-host report " + run.dir + ")" : run.report}};
  for (const auto& fact : facts) std::cout << fact[0] << std::string(12 - fact[0].size(), ' ') << fact[1] << "\n";
  if (!run.problems.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& p : run.problems) {
      rows.push_back({p.case_name, p.problem, Number(p.baseline_ms), Number(p.best_ms), Number(p.speedup, 4, "x"), p.status});
    }
    std::cout << "\n" << FormatTable({"CASE", "PROBLEM", "BASELINE MS", "BEST MS", "SPEEDUP", "STATUS"}, rows, {2, 3, 4});
  }
  return kExitOk;
}

int CompareCommand(const CompareOptions& options) {
  std::string error;
  auto a = FindRun(options.a, options.root, &error);
  auto b = a ? FindRun(options.b, options.root, &error) : std::nullopt;
  if (!a || !b) {
    std::cerr << "error: " << error << "\n";
    return kExitUsage;
  }
  json result;
  try {
    python::Initialize();
    json request = {{"a", a->dir}, {"b", b->dir}};
    if (!options.out.empty()) request["out"] = fs::absolute(options.out).string();
    result = python::CallJson(accelopt::api::kReportCompareRuns, request);
  } catch (const std::exception& failure) {
    std::cerr << "error: cannot compare the runs: " << failure.what() << "\n";
    return kExitUsage;
  }
  if (options.json) {
    std::cout << result.dump(2) << "\n";
    return kExitOk;
  }
  auto number = [](const json& value) { return value.is_number() ? std::optional<double>(value.get<double>()) : std::nullopt; };
  double max_ms = 0;
  for (const auto& row : result["rows"]) {
    max_ms = std::max({max_ms, number(row["a_ms"]).value_or(0), number(row["b_ms"]).value_or(0)});
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : result["rows"]) {
    rows.push_back({row.value("case_name", ""), Number(number(row["a_ms"])), Number(number(row["b_ms"])),
                    Number(number(row["ratio"]), 4, "x"), "A " + Bar(number(row["a_ms"]), max_ms, 16),
                    "B " + Bar(number(row["b_ms"]), max_ms, 16)});
  }
  std::cout << "A: " << result["a"].value("id", "") << " (" << result["a"].value("name", "") << ", "
            << result["a"].value("kind", "") << ")\n"
            << "B: " << result["b"].value("id", "") << " (" << result["b"].value("name", "") << ", "
            << result["b"].value("kind", "") << ")\n\n";
  std::cout << FormatTable({"CASE", "A BEST MS", "B BEST MS", "A/B", "LATENCY", ""}, rows, {1, 2, 3});
  int faster = 0, slower = 0, both = 0;
  for (const auto& row : result["rows"]) {
    if (auto ratio = number(row["ratio"])) {
      ++both;
      faster += *ratio > 1.0;
      slower += *ratio < 1.0;
    }
  }
  std::cout << "\ngeomean A/B latency " << Number(number(result["geomean_ratio"]), 4, "x") << " over " << both
            << " case(s) both runs have: B faster on " << faster << ", slower on " << slower << "\n";
  if (result.contains("path")) std::cout << "chart: " << result["path"].get<std::string>() << "\n";
  else std::cout << "(--out FILE.html writes the comparison with charts)\n";
  return kExitOk;
}

}  // namespace accelopt::cli
