#include "cli/run_outcome.h"

#include <fstream>

#include "cli/commands.h"

namespace accelopt::cli {

using nlohmann::json;

namespace {

int64_t Count(const json& totals, const char* key) {
  return totals.is_object() && totals.contains(key) && totals[key].is_number_integer() ? totals[key].get<int64_t>() : 0;
}

// "'default' at http://..." for each configured endpoint.
std::string Endpoints(const json& llm) {
  std::string out;
  if (!llm.contains("endpoints") || !llm["endpoints"].is_object()) return out;
  for (const auto& [name, endpoint] : llm["endpoints"].items()) {
    out += (out.empty() ? "" : ", ") + ("'" + name + "'");
    if (endpoint.is_object() && endpoint.contains("base_url") && endpoint["base_url"].is_string())
      out += " at " + endpoint["base_url"].get<std::string>();
  }
  return out;
}

}  // namespace

json FirstTranscriptError(const std::string& transcript_path, int max_lines) {
  std::ifstream in(transcript_path);
  std::string line;
  for (int n = 0; n < max_lines && std::getline(in, line); ++n) {
    json entry = json::parse(line, nullptr, false);
    if (entry.is_object() && entry.contains("error") && entry["error"].is_object()) return entry["error"];
  }
  return nullptr;
}

RunOutcome DecideOutcome(const RunResult& result, const json& services, const json& first_llm_error) {
  if (result.status == "interrupted") {
    return {"interrupted", kExitFailed,
            {{"kind", "interrupted"}, {"message", "stopped by Ctrl-C / SIGTERM; `run --resume` continues it"}}};
  }
  for (const auto& [id, stage] : result.stages.items()) {
    if (stage.is_object() && stage["error"].is_object() && stage["error"].value("kind", "") == "usage_error") {
      return {"failed", kExitUsage,
              {{"kind", "usage_error"}, {"stage", id}, {"message", stage["error"].value("message", std::string())}}};
    }
  }
  const json llm = services.is_object() && services.contains("llm") ? services["llm"] : json();
  if (llm.is_object() && llm.contains("usage")) {
    const json total = llm["usage"].value("total", json::object());
    const int64_t ok = Count(total, "requests"), failed = Count(total, "failed_requests");
    if (ok == 0 && failed > 0) {
      std::string message = "every LLM request of the run failed (" + std::to_string(failed) + " of " +
                            std::to_string(failed) + "; endpoint " + Endpoints(llm) + ")";
      if (first_llm_error.is_object()) {
        message += ": " + first_llm_error.value("kind", std::string("error")) + ": " +
                   first_llm_error.value("message", std::string());
      }
      message += "; see llm/transcript.jsonl";
      return {"failed", kExitFailed, {{"kind", "llm_unavailable"}, {"message", message}}};
    }
  }
  if (result.status != "succeeded") {
    json error = result.first_failure.is_object()
                     ? result.first_failure
                     : json{{"kind", "stage_error"}, {"message", "a stage failed (see stages/*/status.json)"}};
    return {"failed", kExitFailed, error};
  }
  return {"succeeded", kExitOk, nullptr};
}

std::string OutcomeLine(const std::string& name, const RunOutcome& outcome, const RunResult& result,
                        const std::string& run_dir) {
  std::string line = "run " + name + ": " + outcome.status + " (" + std::to_string(result.failed_stages) +
                     " failed stages, " + std::to_string(result.failed_items) + " failed items";
  if (outcome.error.is_object() && outcome.status != "succeeded") {
    std::string cause = outcome.error.value("message", std::string());
    if (cause.size() > 300) cause = cause.substr(0, 300) + "...";
    line += "; " + outcome.error.value("kind", std::string("error")) + ": " + cause;
  }
  return line + ") — " + run_dir;
}

}  // namespace accelopt::cli
