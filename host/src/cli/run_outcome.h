// run_outcome.h - how a finished run ends: its status, exit code and first
// cause, decided in one place (docs/cli.md, "Statuses and exit codes"), so
// that run.json, the run's last log line and the exit code always agree.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "pipeline/executor.h"

namespace accelopt::cli {

struct RunOutcome {
  std::string status;  // succeeded | failed | interrupted
  int exit_code = 0;   // 0, 1 or 2 (usage)
  nlohmann::json error;  // {"kind", "message", "stage"?, "dir"?} for run.json; null when succeeded
};

/// The outcome of an executor result, given the run services' summary
/// (RunServices::Summary(): `llm.usage.total` counts requests and failures).
/// In order:
///  * interrupted (Ctrl-C / SIGTERM) -> interrupted, 1;
///  * a stage failed with kind usage_error (the run cannot work as
///    configured) -> failed, 2;
///  * the run made LLM requests and every one of them failed (an unreachable
///    or misconfigured endpoint) -> failed, 1, kind llm_unavailable, naming
///    the endpoint and the first error (`first_llm_error`);
///  * a stage or a counted item failed -> failed, 1, the first failure;
///  * else succeeded, 0.
RunOutcome DecideOutcome(const RunResult& result, const nlohmann::json& services,
                         const nlohmann::json& first_llm_error = nullptr);

/// The first failed request of an LLM transcript (llm/transcript.jsonl):
/// its `error` object, or null. Reads at most the first `max_lines` lines.
nlohmann::json FirstTranscriptError(const std::string& transcript_path, int max_lines = 200);

/// The run's last log line: "run NAME: STATUS (N failed stages, M failed
/// items[: first cause]) — RUN_DIR".
std::string OutcomeLine(const std::string& name, const RunOutcome& outcome, const RunResult& result,
                        const std::string& run_dir);

}  // namespace accelopt::cli
