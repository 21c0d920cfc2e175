#include "cli/report_command.h"

#include <chrono>
#include <iostream>

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "core/run_dir.h"
#include "python/interpreter.h"
#include "report/run_index.h"
#include "report/run_summary.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace accelopt::cli {

json WriteReport(const fs::path& given, const fs::path& out) {
  const fs::path run_dir = report::NormalizeRunDir(given);
  const fs::path target = out.empty() ? run_dir / "report.html" : fs::absolute(out).lexically_normal();
  json result = python::CallJson(accelopt::api::kReportRender,
                                 {{"run_dir", run_dir.string()}, {"out", target.string()}});
  const std::string html = result.value("html", "");
  result.erase("html");
  result.erase("out");
  // Inside the run directory nothing below it is followed if it is a symlink; elsewhere the parent is the user's.
  const fs::path base = out.empty() ? run_dir : target.parent_path();
  WriteFileNoFollow(base, target.filename(), html);
  result["path"] = target.string();
  result["bytes"] = html.size();
  return result;
}

int ReportCommand(const ReportOptions& options) {
  const fs::path run_dir = options.run_dir;
  if (!fs::is_regular_file(run_dir / "run.json")) {
    std::cerr << "error: " << run_dir.string() << " is not a run directory (no run.json)\n";
    return kExitUsage;
  }
  try {
    python::Initialize();
  } catch (const python::PythonError& error) {
    std::cerr << "error: cannot start the embedded Python: " << error.what() << "\n";
    return kExitUsage;
  }
  json result;
  try {
    result = WriteReport(run_dir, options.out);
  } catch (const std::exception& error) {
    std::cerr << "error: cannot write the report of " << run_dir.string() << ": " << error.what() << "\n";
    return kExitUsage;
  }
  if (options.json) {
    std::cout << result.dump(2) << "\n";
    return kExitOk;
  }
  for (const auto& warning : result.value("warnings", json::array())) spdlog::warn("report: {}", warning.get<std::string>());
  std::printf("%s (%s run, %d charts, %.0f KiB, %.2f s)\n", result["path"].get<std::string>().c_str(),
              result.value("kind", "?").c_str(), result.value("charts", 0), result.value("bytes", 0) / 1024.0,
              result.value("seconds", 0.0));
  return kExitOk;
}

void FinishRunArtifacts(const fs::path& run_dir) {
  const auto start = std::chrono::steady_clock::now();
  try {
    json result = WriteReport(run_dir);
    for (const auto& warning : result.value("warnings", json::array())) spdlog::warn("report: {}", warning.get<std::string>());
    spdlog::info("report: {} ({:.2f} s)", result["path"].get<std::string>(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  } catch (const std::exception& error) {
    spdlog::warn("report: cannot write {}/report.html: {} (the run's results are unaffected; "
                 "retry with `accelopt-host report {}`)", run_dir.string(), error.what(), run_dir.string());
  }
  try {
    const fs::path root = report::NormalizeRunDir(run_dir).parent_path();
    report::RunIndex index(report::IndexFile(root));
    report::IndexedRun run = report::SummarizeRun(run_dir);
    run.run_json_mtime = report::RunJsonMtime(run_dir);
    index.Upsert(run);
  } catch (const std::exception& error) {
    spdlog::warn("runs index: cannot record {}: {} (`accelopt-host runs --rebuild` rebuilds it)", run_dir.string(), error.what());
  }
}

}  // namespace accelopt::cli
