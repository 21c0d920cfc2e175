// report_command.h - `accelopt-host report RUN_DIR [--out FILE]` and the
// report + index step at the end of every `run` (docs/reports.md).
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace accelopt::cli {

struct ReportOptions {
  std::string run_dir;  // a run directory (runs/<id>)
  std::string out;      // the page to write; "" = RUN_DIR/report.html
  bool json = false;    // print {path, kind, charts, bytes, seconds, warnings}
};

/// Writes the run's HTML report. Returns 0, or 2 when RUN_DIR is not a run
/// directory, Python cannot start or the page cannot be built or written.
int ReportCommand(const ReportOptions& options);

/// Renders RUN_DIR's report through the embedded Python (which must be
/// initialized) and writes it to `out` (default RUN_DIR/report.html) through a
/// temporary file renamed over it, never following a symlink below RUN_DIR.
/// Returns {path, kind, charts, bytes, seconds, warnings}. Throws on failure.
nlohmann::json WriteReport(const std::filesystem::path& run_dir, const std::filesystem::path& out = {});

/// The end of `run`: writes RUN_DIR/report.html and records the run in the
/// index of RUN_DIR's parent folder (<parent>/index.sqlite). Never throws and
/// never changes the run's outcome: a failure is logged as a warning.
void FinishRunArtifacts(const std::filesystem::path& run_dir);

}  // namespace accelopt::cli
