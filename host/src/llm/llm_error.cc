#include "llm/llm_error.h"

namespace accelopt::llm {

namespace {

std::string Describe(ErrorKind kind, int status, const std::string& message) {
  std::string text = ErrorKindName(kind);
  text += ": ";
  if (status != 0) text += "HTTP " + std::to_string(status) + ": ";
  text += message;
  return text;
}

}  // namespace

const char* ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kRateLimit: return "llm_rate_limit";
    case ErrorKind::kServer: return "llm_server";
    case ErrorKind::kClient: return "llm_client";
    case ErrorKind::kTimeout: return "llm_timeout";
    case ErrorKind::kConnection: return "llm_connection";
    case ErrorKind::kBadOutput: return "llm_bad_output";
    case ErrorKind::kReplayMiss: return "llm_replay_miss";
    case ErrorKind::kConfig: return "llm_config";
    case ErrorKind::kSpendCap: return "llm_spend_cap";
  }
  return "llm_unknown";
}

ErrorKind ErrorKindFromName(std::string_view name) {
  for (ErrorKind kind : {ErrorKind::kRateLimit, ErrorKind::kServer, ErrorKind::kClient, ErrorKind::kTimeout,
                         ErrorKind::kConnection, ErrorKind::kBadOutput, ErrorKind::kReplayMiss, ErrorKind::kConfig,
                         ErrorKind::kSpendCap}) {
    if (name == ErrorKindName(kind)) return kind;
  }
  throw std::invalid_argument("unknown LLM error kind '" + std::string(name) + "'");
}

LlmError::LlmError(ErrorKind kind_in, int status_in, std::string message_in, int attempts_in)
    : std::runtime_error(Describe(kind_in, status_in, message_in)),
      kind(kind_in),
      status(status_in),
      message(std::move(message_in)),
      attempts(attempts_in) {}

nlohmann::json LlmError::ToJson() const {
  return {{"kind", kind_name()}, {"message", message}, {"details", {{"status", status}, {"attempts", attempts}}}};
}

void ThrowConfigError(const std::string& message) { throw LlmError(ErrorKind::kConfig, 0, message); }

}  // namespace accelopt::llm
