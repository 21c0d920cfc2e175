// run_index.h - the SQLite index of the runs under one root folder
// (`<root>/index.sqlite`, SQLiteCpp): one row per run (id, pipeline, kind,
// status, start, duration, geomean speedup) and one per problem of a run
// (baseline and best latency). It is a cache: every row comes from the files
// of a run directory (report/run_summary.h) and `SyncIndex` rebuilds it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace SQLite {
class Database;
}

namespace accelopt::report {

/// One case of a run: its baseline and best latency (ms) and status.
struct IndexedProblem {
  std::string case_name;
  std::string problem;
  std::optional<double> baseline_ms;
  std::optional<double> best_ms;
  std::optional<double> speedup;
  std::string status;
};

/// One run as the index holds it.
struct IndexedRun {
  std::string id;        ///< the run directory's name
  std::string dir;       ///< its absolute path
  std::string name;      ///< the pipeline's name
  std::string pipeline;  ///< the pipeline file
  std::string kind;      ///< profile, optimize-beam, generic, ... (accelopt.report.kinds)
  std::string status;    ///< run.json status
  std::string started_at, finished_at;
  std::optional<double> duration_s;
  std::optional<double> geomean_speedup;
  std::optional<int64_t> candidates;
  std::string report;         ///< report.html's path, "" when none
  int64_t run_json_mtime = 0;  ///< run.json's modification time (ns) when indexed: a change means re-index
  std::vector<IndexedProblem> problems;

  /// {"id", "dir", "name", ..., "problems": [...]} (nulls for missing numbers).
  nlohmann::json ToJson() const;
  /// The inverse of ToJson; also reads accelopt.report.summarize_run's result. Missing fields stay empty.
  static IndexedRun FromJson(const nlohmann::json& value);
};

/// The index file of a root folder: `<root>/index.sqlite`.
std::filesystem::path IndexFile(const std::filesystem::path& root);

/// The SQLite index. Writers wait up to 10 s for a lock held by another
/// process (runs finishing together). Throws SQLite::Exception (a
/// std::runtime_error) when the file cannot be opened or is not an index.
class RunIndex {
 public:
  /// Opens (creating when missing) the index file and its tables.
  explicit RunIndex(const std::filesystem::path& file);
  ~RunIndex();
  RunIndex(const RunIndex&) = delete;
  RunIndex& operator=(const RunIndex&) = delete;

  /// Inserts or replaces a run and its problems (one transaction).
  void Upsert(const IndexedRun& run);
  /// Removes a run and its problems; no-op when absent.
  void Remove(const std::string& id);
  /// Every run, newest start first (problems included).
  std::vector<IndexedRun> List() const;
  /// The run with this id, or nullopt.
  std::optional<IndexedRun> Find(const std::string& id) const;
  /// Removes every row (before a rebuild).
  void Clear();

 private:
  std::vector<IndexedRun> Query(const std::string& where, const std::string& id) const;
  std::unique_ptr<SQLite::Database> db_;
};

/// run.json's modification time in ns (0 when missing).
int64_t RunJsonMtime(const std::filesystem::path& run_dir);

/// The folders directly under `root` that hold a run.json, sorted by name.
std::vector<std::filesystem::path> FindRunDirs(const std::filesystem::path& root);

/// What SyncIndex did.
struct SyncStats {
  int added = 0, updated = 0, removed = 0, unchanged = 0;
};

/// Brings the index up to date with the run directories under `root`: a run
/// that is new or whose run.json changed is summarized again with
/// `summarize` (a run directory -> IndexedRun); a row whose folder is gone is
/// removed. With `rebuild`, every row is dropped and every run summarized.
/// A run that cannot be summarized is skipped with its error in `errors`.
SyncStats SyncIndex(RunIndex& index, const std::filesystem::path& root,
                    const std::function<IndexedRun(const std::filesystem::path&)>& summarize, bool rebuild,
                    std::vector<std::string>* errors = nullptr);

}  // namespace accelopt::report
