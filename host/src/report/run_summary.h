// run_summary.h - what the run index and `compare` know of one run
// directory: run.json's facts plus the summary of its kind (per-case
// baseline and best latency, geomean speedup) from accelopt.report.
#pragma once

#include <filesystem>

#include "report/run_index.h"

namespace accelopt::report {

/// `run_dir` as an absolute, normal path without a trailing separator
/// (its filename is the run id).
std::filesystem::path NormalizeRunDir(const std::filesystem::path& run_dir);

/// Summarizes `run_dir` through the embedded Python (accelopt.report.summarize_run),
/// which must be initialized. When Python fails, falls back to
/// RunJsonSummary (kind "unknown") and logs a warning. Throws
/// std::runtime_error when `run_dir` has no readable run.json.
IndexedRun SummarizeRun(const std::filesystem::path& run_dir);

/// The facts run.json alone gives (id, dir, name, pipeline, status, times,
/// duration); kind "unknown" and no problems. Throws std::runtime_error when
/// run.json is missing or not JSON.
IndexedRun RunJsonSummary(const std::filesystem::path& run_dir);

}  // namespace accelopt::report
