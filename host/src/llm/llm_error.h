// llm/llm_error.h - the error taxonomy of the LLM client.
//
// Every failure of a chat completion (live, replayed or scripted) surfaces as
// an LlmError carrying a machine-readable kind. The kinds double as the
// `retry.on` / journal error kinds of the pipeline (see docs/llm.md).
#pragma once

#include <stdexcept>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace accelopt::llm {

/// Machine-readable class of an LLM failure.
enum class ErrorKind {
  kRateLimit,   ///< "llm_rate_limit": HTTP 429 after all retries.
  kServer,      ///< "llm_server": HTTP 5xx (and 409) after all retries.
  kClient,      ///< "llm_client": other HTTP 4xx; never retried.
  kTimeout,     ///< "llm_timeout": transfer timed out (or HTTP 408) after all retries.
  kConnection,  ///< "llm_connection": could not connect / send / receive after all retries.
  kBadOutput,   ///< "llm_bad_output": HTTP 200 but unparsable JSON or no choices[0].message.
  kReplayMiss,  ///< "llm_replay_miss": replay mode and no recorded response matches.
  kConfig,      ///< "llm_config": invalid endpoint configuration or unknown endpoint name.
  kSpendCap,    ///< "llm_spend_cap": a spend cap (requests, tokens or USD, per problem or run) is reached;
                ///< the request was not sent (llm/spend_caps.h). Never retried.
};

/// The stable string name of a kind, e.g. "llm_rate_limit".
const char* ErrorKindName(ErrorKind kind);

/// Parses a name produced by ErrorKindName. Throws std::invalid_argument on an unknown name.
ErrorKind ErrorKindFromName(std::string_view name);

/// A failed LLM interaction. Thrown by ChatClient::Complete and by configuration parsing.
///
/// what() reads "<kind>: [HTTP <status>: ]<message>".
class LlmError : public std::runtime_error {
 public:
  /// @param kind     the error class.
  /// @param status   HTTP status of the last attempt, 0 when there was no HTTP response.
  /// @param message  human-readable detail (for HTTP errors: the server's error.message).
  /// @param attempts number of HTTP attempts made (0 when none, e.g. config or replay errors).
  LlmError(ErrorKind kind, int status, std::string message, int attempts = 0);

  ErrorKind kind;       ///< Error class.
  int status;           ///< HTTP status of the last attempt; 0 if none.
  std::string message;  ///< Detail without the kind prefix.
  int attempts;         ///< HTTP attempts made before giving up.

  /// Shorthand for ErrorKindName(kind).
  const char* kind_name() const { return ErrorKindName(kind); }

  /// The stage-error shape used by journals and plugins:
  /// {"kind": kind_name(), "message": message, "details": {"status", "attempts"}}.
  nlohmann::json ToJson() const;
};

/// Throws LlmError{kConfig, 0, message}.
[[noreturn]] void ThrowConfigError(const std::string& message);

}  // namespace accelopt::llm
