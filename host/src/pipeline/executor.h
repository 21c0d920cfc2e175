// executor.h - runs a validated pipeline.
//
// Stages run in file order. Each runnable stage gets its directory
// (inputs.json, outputs.json, status.json, log.txt), its `with` resolved
// against the expression context, optional retries and a timeout. A
// `for_each` stage fans out over a list with up to `max_parallel` items at
// once; a `loop` group repeats its stages until `until` holds or
// `max_iterations` is reached, threading `carry` state between iterations.
// A failed stage with `on_failure: continue` (or a failed item) is recorded
// and the run goes on; otherwise later stages are skipped unless their `if`
// asks for failure()/always(). Finished results are on disk as soon as each
// stage (or item) ends.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/journal.h"
#include "core/progress.h"
#include "core/run_dir.h"
#include "pipeline/model.h"
#include "pipeline/validator.h"

namespace accelopt {

/// Outcome of a whole run (docs/cli.md, "Statuses and exit codes"): one
/// status per exit code, so run.json, the last log line and the exit code agree.
struct RunResult {
  /// succeeded (every stage and item succeeded; items the stage declares
  /// expected, `failed_items: ignore`, do not count) | failed (a stage or an
  /// item failed, with on_failure: continue too) | interrupted.
  std::string status = "succeeded";
  int failed_stages = 0;
  int failed_items = 0;
  nlohmann::json stages = nlohmann::json::object();  // id -> {status, outputs, error}
  /// The first failure, the cause later failures may follow from:
  /// {"stage", "dir" (run-relative), "kind", "message"}; null when none.
  nlohmann::json first_failure;
  /// 0 = succeeded; 1 = failed or interrupted.
  int ExitCode() const { return status == "succeeded" ? 0 : 1; }
};

/// Stages given up on at their timeout whose threads still run (a stage that
/// ignores its cancel flag, e.g. one blocked in an LLM request). While this is
/// above 0 the process must not unload plugins or destroy the run's services:
/// the CLI then ends with std::_Exit once every result is on disk.
int AbandonedStages();

class Executor {
 public:
  Executor(const Pipeline& pipeline, const ResolvedStages& stages, const RunDirectory& run_dir, Progress& progress);

  /// Ctrl-C flag shared with the signal handler; when set, no new stage or
  /// item starts, running ones see `cancelled`, and the run is "interrupted".
  void SetCancelFlag(std::shared_ptr<std::atomic<bool>> cancelled) { cancelled_ = std::move(cancelled); }

  /// Maximum items in flight across a for_each, whatever max_parallel says.
  void SetParallelCap(int cap) { parallel_cap_ = cap; }

  /// Resume mode: a stage or item whose directory already holds
  /// status.json with status "ok" and inputs.json with the same resolved
  /// `with` is not run again; its outputs.json is reused, but only if its
  /// SHA-256 equals the `outputs_sha256` the journal recorded for that
  /// directory. An outputs.json edited after it was journaled (or one with
  /// no journaled hash) is not trusted: the stage or item runs again, with
  /// a warning naming the file.
  void SetResume(bool resume) { resume_ = resume; }

  /// Journal receiving stage/item events (optional).
  void SetJournal(Journal* journal) { journal_ = journal; }

  /// Number of stage invocations reused from an earlier attempt.
  int reused() const { return reused_.load(); }

  RunResult Run();

 private:
  struct Scope;
  struct StageRecord;
  bool RunList(const std::vector<StageSpec>& list, const std::filesystem::path& dir, Scope& scope);
  StageRecord RunStage(const StageSpec& spec, const std::filesystem::path& dir, Scope& scope);
  StageRecord RunLoop(const StageSpec& spec, const std::filesystem::path& dir, Scope& scope);
  StageRecord RunForEach(const StageSpec& spec, const std::filesystem::path& dir, const nlohmann::json& context);
  std::optional<nlohmann::json> Reusable(const std::filesystem::path& dir, const nlohmann::json& with,
                                        std::string* sha256) const;
  std::string WriteOutputs(const std::filesystem::path& dir, const nlohmann::json& outputs) const;
  nlohmann::json Invoke(const StageSpec& spec, const std::filesystem::path& dir, const nlohmann::json& context,
                        const std::string& label, int* attempts, std::string* outputs_sha256);
  void Record(nlohmann::json event);
  bool Cancelled() const { return cancelled_ && cancelled_->load(); }

  const Pipeline& pipeline_;
  const ResolvedStages& stages_;
  const RunDirectory& run_dir_;
  Progress& progress_;
  std::shared_ptr<std::atomic<bool>> cancelled_;
  int parallel_cap_ = 64;
  bool resume_ = false;
  Journal* journal_ = nullptr;
  std::map<std::string, std::string> journaled_hashes_;  // dir (relative) -> outputs_sha256, for resume
  std::atomic<int> reused_{0};
  bool failed_ = false;
  RunResult result_;
  std::mutex result_mutex_;
};

}  // namespace accelopt
