// run_record.h - run.json over the life of one run: "running" while it goes
// on, and a final status on every exit path the process can observe.
//
// Final statuses: "succeeded", "failed", "interrupted" (Ctrl-C / SIGTERM) and
// "crashed" (a fatal signal or an unhandled C++ exception). Only SIGKILL (and
// power loss) can leave "running" behind; `run --resume` handles those.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/run_dir.h"

namespace accelopt::cli {

/// Owns `<run_dir>/run.json`. The constructor writes it with status
/// "running" and arms the process-wide emergency handlers: until Finish()
/// runs (or the record is destroyed), a second SIGINT/SIGTERM rewrites
/// run.json with status "interrupted" before exiting with code 130, and a
/// fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) or std::terminate
/// rewrites it with status "crashed" before the default action. Those texts
/// are prepared in advance and written with open/write/fsync/rename only,
/// which are async-signal-safe. One RunRecord may be armed at a time.
class RunRecord {
 public:
  /// Writes `running` (its "status" is set to "running"). Throws
  /// std::runtime_error if run.json cannot be written.
  RunRecord(const RunDirectory& run_dir, nlohmann::json running);
  /// If Finish() was not called: writes status "failed" with error "the run
  /// ended before its result was recorded" (never leaves "running").
  ~RunRecord();
  RunRecord(const RunRecord&) = delete;
  RunRecord& operator=(const RunRecord&) = delete;

  /// The document; changes reach disk with Finish() (and the emergency
  /// texts with Refresh()).
  nlohmann::json& json() { return json_; }

  /// Re-prepares the emergency texts from the current document.
  void Refresh();

  /// Sets "status" and "finished_at" (and "error" when given), writes
  /// run.json and disarms the emergency handlers. Never throws (a write
  /// failure is logged).
  void Finish(const std::string& status, const nlohmann::json& error = nullptr);

  /// The texts an emergency handler writes (prepared ahead: async-signal-safe).
  struct Emergency;

 private:
  const RunDirectory& run_dir_;
  nlohmann::json json_;
  std::vector<std::unique_ptr<Emergency>> prepared_;  // kept alive while a handler may read them
  bool finished_ = false;
};

/// SIGINT and SIGTERM: the first raises `cancel` (no new stage or item
/// starts; running stages see their cancel flag); the second exits at once
/// with code 130, after writing the armed RunRecord's "interrupted" text.
/// Also installs the fatal-signal and std::terminate handlers of RunRecord.
/// `cancel` must outlive the process's handling of signals (keep it global).
void InstallSignalHandlers(std::atomic<bool>* cancel);

}  // namespace accelopt::cli
