// llm/chat_client.h - the chat-completions interface every LLM caller uses.
//
// Implementations (Ninja's CommandRunner pattern):
//   CurlChatClient      live HTTP to an OpenAI-compatible server (curl_chat_client.h)
//   RecordingChatClient decorator writing llm/transcript.jsonl + usage ledger (transcript.h)
//   ReplayChatClient    answers from a transcript, no server (transcript.h)
//   ScriptedChatClient  queue of canned replies for unit tests (scripted_chat_client.h)
// ClientRegistry (client_registry.h) builds the right stack for each endpoint.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm/llm_error.h"

namespace accelopt::llm {

struct EndpointConfig;

/// One chat completion request.
struct ChatRequest {
  std::string endpoint;     ///< Endpoint name from the `llm:` block (informational for a bound client).
  nlohmann::json messages = nlohmann::json::array();  ///< OpenAI messages: [{"role", "content"}, ...].
  std::optional<double> temperature;  ///< Overrides the endpoint's default when set.
  std::optional<int> max_tokens;      ///< Completion budget in tokens; overrides the endpoint's default.
  nlohmann::json extra = nlohmann::json::object();  ///< Extra body fields (response_format, seed, tools, top_p, ...).
  std::string stage;        ///< Calling stage id, for the transcript and the usage ledger.
  /// The problem the request works on ("" = none), for the per-problem spend caps
  /// (llm/spend_caps.h) and the transcript's meta. Not part of the request body or its key.
  std::string problem;
};

/// A successful chat completion.
struct ChatResponse {
  std::string content;        ///< choices[0].message.content ("" when null, e.g. tool calls).
  std::string reasoning;      ///< choices[0].message.reasoning_content or .reasoning ("" when absent).
  std::string finish_reason;  ///< choices[0].finish_reason ("" when absent).
  std::string model;          ///< The model the server reports ("" when absent).
  std::string request_id;     ///< x-request-id response header or the body's "id" ("" when absent).
  int64_t prompt_tokens = 0;      ///< usage.prompt_tokens (0 when the server sends no usage).
  int64_t completion_tokens = 0;  ///< usage.completion_tokens (0 when the server sends no usage).
  int64_t latency_ms = 0;     ///< Wall time of the whole call including retries and backoff, ms.
  int attempts = 0;           ///< HTTP attempts made (1 = no retry; recorded value when replayed).
  bool replayed = false;      ///< True when answered from a transcript instead of a server.
  nlohmann::json raw;         ///< The full parsed response body.
};

/// Result of one request of a batch: exactly one of response / error is set.
struct Outcome {
  std::optional<ChatResponse> response;  ///< Set on success.
  std::optional<LlmError> error;         ///< Set on failure.
  /// True when response is set.
  bool ok() const { return response.has_value(); }
};

/// Abstract chat-completions client bound to one endpoint. Implementations are thread-safe:
/// Complete may be called from many threads at once.
class ChatClient {
 public:
  virtual ~ChatClient() = default;

  /// Runs one request to completion (including retries). Blocks the calling thread.
  /// Throws LlmError on failure (any kind); never returns a partial response.
  virtual ChatResponse Complete(const ChatRequest& request) = 0;

  /// Runs a batch with up to MaxConcurrency() requests in flight and returns outcomes in
  /// request order. Never throws for a failed request (the Outcome holds its LlmError).
  virtual std::vector<Outcome> CompleteMany(const std::vector<ChatRequest>& requests);

  /// How many requests this client serves at once (CompleteMany's parallelism). Default 1.
  virtual int MaxConcurrency() const { return 1; }

  /// The endpoint this client talks to, or nullptr when not bound to one (scripted clients).
  virtual const EndpointConfig* Endpoint() const { return nullptr; }
};

/// Builds the JSON body of POST /chat/completions: endpoint.extra, then request.extra
/// (overriding), then model, messages, temperature and max_tokens (request values over
/// endpoint defaults; omitted when neither is set). "stream" is forced to false.
/// Throws LlmError{llm_config} when messages is not an array or extra is not an object.
nlohmann::json BuildRequestBody(const ChatRequest& request, const EndpointConfig& endpoint);

/// Parses a 200 response body into a ChatResponse (content, reasoning, finish_reason,
/// usage, model, id; latency/attempts left 0). Throws LlmError{llm_bad_output} when the body
/// is not JSON or has no choices[0].message object.
ChatResponse ParseResponseBody(const std::string& body);

/// Same as ParseResponseBody for an already parsed body.
ChatResponse ParseResponseJson(const nlohmann::json& body);

/// Extracts the most useful error text from an error response body: error.message
/// (OpenAI), error (string; Ollama), message (vLLM), detail (FastAPI), else the body
/// truncated to 500 characters.
std::string ExtractErrorMessage(const std::string& body);

}  // namespace accelopt::llm
