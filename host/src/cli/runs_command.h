// runs_command.h - `accelopt-host runs`, `runs show ID` and `compare RUN_A RUN_B`:
// the run index under a root folder and run-to-run comparison (docs/reports.md).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "report/run_index.h"

namespace accelopt::cli {

struct RunsOptions {
  std::string root = "runs";  // the folder holding run directories (and index.sqlite)
  bool rebuild = false;       // drop the index and summarize every run again
  bool json = false;          // print JSON
};

/// Lists the runs under `root` (id, pipeline, started, status, duration,
/// geomean speedup), newest first, after bringing the index up to date.
/// Returns 0, or 2 when `root` is not a folder or the index cannot be opened.
int RunsCommand(const RunsOptions& options);

/// Shows one run: its facts and per-case baseline/best latencies. `id` is a
/// run id (or a unique prefix of one) in the index, or a run directory.
/// Returns 0, or 2 when it names no run (or several).
int RunsShowCommand(const RunsOptions& options, const std::string& id);

struct CompareOptions {
  std::string a, b;           // run ids (or unique prefixes) under root, or run directories
  std::string root = "runs";  // where ids are looked up
  std::string out;            // also write the comparison page (HTML with charts) here
  bool json = false;          // print JSON
};

/// Per-case best latency of two runs side by side, with B's speedup over A,
/// as a table with bars on the terminal and, with `out`, an HTML page with
/// charts. Returns 0, or 2 when a run cannot be found or read.
int CompareCommand(const CompareOptions& options);

/// The run `reference` names: a folder with run.json (summarized now), else
/// an id (exact, or a unique prefix) in `root`'s index (brought up to date
/// first). Returns nullopt and sets `*error` when there is none or several.
std::optional<report::IndexedRun> FindRun(const std::string& reference, const std::filesystem::path& root,
                                          std::string* error);

}  // namespace accelopt::cli
