#include "report/run_summary.h"

#include <stdexcept>

#include <spdlog/spdlog.h>

#include "core/text.h"
#include "python/interpreter.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace accelopt::report {

fs::path NormalizeRunDir(const fs::path& run_dir) {
  fs::path path = fs::absolute(run_dir).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();
  return path;
}

IndexedRun RunJsonSummary(const fs::path& given) {
  const fs::path run_dir = NormalizeRunDir(given);
  json run_json;
  try {
    run_json = json::parse(ReadFile(run_dir / "run.json"));
  } catch (const std::exception& error) {
    throw std::runtime_error((run_dir / "run.json").string() + ": " + error.what());
  }
  IndexedRun run = IndexedRun::FromJson(run_json);
  run.id = run_dir.filename().string();
  run.dir = run_dir.string();
  run.kind = "unknown";
  run.problems.clear();
  if (fs::exists(run_dir / "report.html")) run.report = (fs::path(run.dir) / "report.html").string();
  return run;
}

IndexedRun SummarizeRun(const fs::path& given) {
  const fs::path run_dir = NormalizeRunDir(given);
  if (!fs::is_regular_file(run_dir / "run.json")) throw std::runtime_error(run_dir.string() + ": no run.json (not a run directory)");
  try {
    json summary = python::CallJson(accelopt::api::kReportSummarizeRun, {{"run_dir", run_dir.string()}});
    IndexedRun run = IndexedRun::FromJson(summary);
    run.id = run_dir.filename().string();
    run.dir = run_dir.string();
    return run;
  } catch (const std::exception& error) {
    spdlog::warn("{}: cannot summarize the run ({}); indexing run.json's facts only", run_dir.string(), error.what());
    return RunJsonSummary(run_dir);
  }
}

}  // namespace accelopt::report
