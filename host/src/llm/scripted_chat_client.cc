#include "llm/scripted_chat_client.h"

namespace accelopt::llm {

ScriptedChatClient::ScriptedChatClient(std::optional<EndpointConfig> endpoint) : endpoint_(std::move(endpoint)) {}

void ScriptedChatClient::PushReply(std::string content, int64_t prompt_tokens, int64_t completion_tokens) {
  ChatResponse response;
  response.content = std::move(content);
  response.finish_reason = "stop";
  response.prompt_tokens = prompt_tokens;
  response.completion_tokens = completion_tokens;
  PushResponse(std::move(response));
}

void ScriptedChatClient::PushResponse(ChatResponse response) {
  if (response.raw.is_null()) {
    response.raw = {{"object", "chat.completion"},
                    {"model", response.model},
                    {"choices",
                     {{{"index", 0},
                       {"message", {{"role", "assistant"}, {"content", response.content}}},
                       {"finish_reason", response.finish_reason}}}},
                    {"usage",
                     {{"prompt_tokens", response.prompt_tokens},
                      {"completion_tokens", response.completion_tokens},
                      {"total_tokens", response.prompt_tokens + response.completion_tokens}}}};
  }
  if (response.attempts == 0) response.attempts = 1;
  std::lock_guard<std::mutex> lock(mutex_);
  script_.emplace_back(std::move(response));
}

void ScriptedChatClient::PushError(LlmError error) {
  std::lock_guard<std::mutex> lock(mutex_);
  script_.emplace_back(std::move(error));
}

void ScriptedChatClient::SetResponder(Responder responder) {
  std::lock_guard<std::mutex> lock(mutex_);
  responder_ = std::move(responder);
}

ChatResponse ScriptedChatClient::Complete(const ChatRequest& request) {
  Responder responder;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.push_back(request);
    if (!script_.empty()) {
      auto item = std::move(script_.front());
      script_.pop_front();
      if (auto* error = std::get_if<LlmError>(&item)) throw *error;
      return std::get<ChatResponse>(std::move(item));
    }
    responder = responder_;
  }
  if (responder) return responder(request);
  throw LlmError(ErrorKind::kReplayMiss, 0,
                 "ScriptedChatClient: no scripted reply left for request #" + std::to_string(Requests().size()) +
                     " (stage '" + request.stage + "')");
}

std::vector<ChatRequest> ScriptedChatClient::Requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_;
}

size_t ScriptedChatClient::Remaining() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return script_.size();
}

}  // namespace accelopt::llm
