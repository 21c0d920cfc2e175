// llm/scripted_chat_client.h - a ChatClient for unit tests of other modules.
//
//   ScriptedChatClient llm;
//   llm.PushReply("```python\n...\n```");
//   llm.PushError(LlmError(ErrorKind::kRateLimit, 429, "slow down"));
//   RunStageUnderTest(llm);
//   REQUIRE(llm.Requests().size() == 2);
#pragma once

#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <variant>
#include <vector>

#include "llm/chat_client.h"
#include "llm/endpoint_config.h"

namespace accelopt::llm {

/// Answers requests from a FIFO queue of canned responses and errors (then from an
/// optional responder function) and records every request it receives. Thread-safe.
class ScriptedChatClient : public ChatClient {
 public:
  /// Computes a reply for requests the queue does not cover; may throw LlmError.
  using Responder = std::function<ChatResponse(const ChatRequest&)>;

  /// @param endpoint optional endpoint to report from Endpoint() (and its max_concurrency).
  explicit ScriptedChatClient(std::optional<EndpointConfig> endpoint = std::nullopt);

  /// Queues a successful reply with this content, finish_reason "stop" and token counts.
  void PushReply(std::string content, int64_t prompt_tokens = 10, int64_t completion_tokens = 20);
  /// Queues a full response (raw is synthesised from content when null).
  void PushResponse(ChatResponse response);
  /// Queues an error to be thrown.
  void PushError(LlmError error);
  /// Sets the fallback used when the queue is empty.
  void SetResponder(Responder responder);

  /// Pops the next scripted item (or calls the responder). Records the request first.
  /// Throws the scripted LlmError, or LlmError{llm_replay_miss} "no scripted reply left".
  ChatResponse Complete(const ChatRequest& request) override;

  /// Copies of all requests received, in arrival order.
  std::vector<ChatRequest> Requests() const;
  /// Number of scripted items not yet consumed.
  size_t Remaining() const;

  /// 1, or the endpoint's max_concurrency when one was given.
  int MaxConcurrency() const override { return endpoint_ ? endpoint_->max_concurrency : 1; }
  /// The endpoint given at construction, or nullptr.
  const EndpointConfig* Endpoint() const override { return endpoint_ ? &*endpoint_ : nullptr; }

 private:
  std::optional<EndpointConfig> endpoint_;
  mutable std::mutex mutex_;
  std::deque<std::variant<ChatResponse, LlmError>> script_;
  Responder responder_;
  std::vector<ChatRequest> requests_;
};

}  // namespace accelopt::llm
