#include "llm/chat_client.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "llm/endpoint_config.h"

namespace accelopt::llm {

using nlohmann::json;

std::vector<Outcome> ChatClient::CompleteMany(const std::vector<ChatRequest>& requests) {
  std::vector<Outcome> outcomes(requests.size());
  std::atomic<size_t> next{0};
  auto drain = [&] {
    for (size_t i = next++; i < requests.size(); i = next++) {
      try {
        outcomes[i].response = Complete(requests[i]);
      } catch (const LlmError& error) {
        outcomes[i].error = error;
      } catch (const std::exception& error) {
        outcomes[i].error = LlmError(ErrorKind::kServer, 0, std::string("unexpected client failure: ") + error.what());
      }
    }
  };
  const size_t parallel = std::min<size_t>(requests.size(), static_cast<size_t>(std::max(1, MaxConcurrency())));
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < parallel; ++t) helpers.emplace_back(drain);
  drain();
  for (auto& helper : helpers) helper.join();
  return outcomes;
}

json BuildRequestBody(const ChatRequest& request, const EndpointConfig& endpoint) {
  if (!request.messages.is_array()) {
    ThrowConfigError("chat request for endpoint '" + endpoint.name + "': messages must be an array, got " +
                     request.messages.type_name());
  }
  if (!request.extra.is_null() && !request.extra.is_object()) {
    ThrowConfigError("chat request for endpoint '" + endpoint.name + "': extra must be an object, got " +
                     request.extra.type_name());
  }
  json body = endpoint.extra.is_object() ? endpoint.extra : json::object();
  if (request.extra.is_object()) {
    for (const auto& [key, value] : request.extra.items()) body[key] = value;
  }
  body["model"] = endpoint.model;
  body["messages"] = request.messages;
  if (request.temperature) {
    body["temperature"] = *request.temperature;
  } else if (endpoint.temperature) {
    body["temperature"] = *endpoint.temperature;
  }
  if (request.max_tokens) {
    body["max_tokens"] = *request.max_tokens;
  } else if (endpoint.max_tokens) {
    body["max_tokens"] = *endpoint.max_tokens;
  }
  body["stream"] = false;
  return body;
}

ChatResponse ParseResponseJson(const json& body) {
  if (!body.is_object()) {
    throw LlmError(ErrorKind::kBadOutput, 200, std::string("response body is a JSON ") + body.type_name() + ", not an object");
  }
  const json* choices = body.contains("choices") ? &body.at("choices") : nullptr;
  if (choices == nullptr || !choices->is_array() || choices->empty()) {
    std::string hint = body.contains("error") ? ": " + body.at("error").dump().substr(0, 300) : "";
    throw LlmError(ErrorKind::kBadOutput, 200, "response has no choices[0]" + hint);
  }
  const json& choice = choices->at(0);
  if (!choice.is_object() || !choice.contains("message") || !choice.at("message").is_object()) {
    throw LlmError(ErrorKind::kBadOutput, 200, "response has no choices[0].message object");
  }
  const json& message = choice.at("message");
  ChatResponse response;
  auto text_of = [](const json& object, const char* key) -> std::string {
    if (!object.contains(key)) return "";
    const json& value = object.at(key);
    if (value.is_string()) return value.get<std::string>();
    if (value.is_array()) {  // content parts: [{"type": "text", "text": ...}, ...]
      std::string joined;
      for (const auto& part : value) {
        if (part.is_object() && part.contains("text") && part.at("text").is_string()) joined += part.at("text").get<std::string>();
      }
      return joined;
    }
    return "";
  };
  response.content = text_of(message, "content");
  response.reasoning = text_of(message, "reasoning_content");
  if (response.reasoning.empty()) response.reasoning = text_of(message, "reasoning");
  response.finish_reason = text_of(choice, "finish_reason");
  response.model = text_of(body, "model");
  response.request_id = text_of(body, "id");
  if (body.contains("usage") && body.at("usage").is_object()) {
    const json& usage = body.at("usage");
    auto count = [&](const char* key) -> int64_t {
      if (!usage.contains(key) || !usage.at(key).is_number()) return 0;
      return usage.at(key).get<int64_t>();
    };
    response.prompt_tokens = count("prompt_tokens");
    response.completion_tokens = count("completion_tokens");
  }
  response.raw = body;
  return response;
}

ChatResponse ParseResponseBody(const std::string& body) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    std::string excerpt = body.substr(0, 200);
    throw LlmError(ErrorKind::kBadOutput, 200,
                   "response body is not valid JSON (" + std::to_string(body.size()) + " bytes: \"" + excerpt + "\")");
  }
  return ParseResponseJson(parsed);
}

std::string ExtractErrorMessage(const std::string& body) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_discarded() && parsed.is_object()) {
    if (parsed.contains("error")) {
      const json& error = parsed.at("error");
      if (error.is_object() && error.contains("message") && error.at("message").is_string()) {
        return error.at("message").get<std::string>();
      }
      if (error.is_string()) return error.get<std::string>();
    }
    for (const char* key : {"message", "detail"}) {
      if (parsed.contains(key)) {
        const json& value = parsed.at(key);
        return value.is_string() ? value.get<std::string>() : value.dump();
      }
    }
  }
  if (body.empty()) return "(empty response body)";
  return body.size() > 500 ? body.substr(0, 500) + "..." : body;
}

}  // namespace accelopt::llm
