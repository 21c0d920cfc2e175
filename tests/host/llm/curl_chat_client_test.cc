#include <catch2/catch.hpp>

#include <chrono>
#include <memory>

#include "host/llm/fake_llm_server.h"
#include "llm/curl_chat_client.h"

using namespace accelopt::llm;
using accelopt::llm::testing::ErrorBody;
using accelopt::llm::testing::FakeLlmServer;
using accelopt::llm::testing::OkBody;
using nlohmann::json;

namespace {

EndpointConfig TestEndpoint(const FakeLlmServer& server) {
  GlobalInit();
  EndpointConfig config;
  config.name = "test";
  config.base_url = server.BaseUrl();
  config.model = "fake-model";
  config.api_key = "sk-test-secret-42";
  config.max_concurrency = 2;
  config.timeout_ms = 2000;
  config.connect_timeout_ms = 1000;
  config.max_retries = 2;
  config.initial_retry_delay_ms = 20;
  config.max_retry_delay_ms = 100;
  return config;
}

ChatRequest Hello(const std::string& text = "hello") {
  ChatRequest request;
  request.endpoint = "test";
  request.stage = "plan";
  request.messages = json::array({{{"role", "system"}, {"content", "be brief"}}, {{"role", "user"}, {"content", text}}});
  return request;
}

LlmError ErrorOf(ChatClient& client, const ChatRequest& request) {
  try {
    client.Complete(request);
  } catch (const LlmError& error) {
    return error;
  }
  FAIL("expected an LlmError");
  return LlmError(ErrorKind::kConfig, 0, "unreachable");
}

int64_t MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("curl_chat_client: success parses content and usage and sends the request", "[llm]") {
  FakeLlmServer server;
  server.Push({200, OkBody("the answer", 123, 45, "length"), {{"x-request-id", "req-1"}}, 0});
  EndpointConfig config = TestEndpoint(server);
  config.temperature = 0.2;
  config.extra = {{"reasoning_effort", "low"}};
  CurlChatClient client(config);

  ChatRequest request = Hello();
  request.max_tokens = 64;
  request.extra = {{"seed", 7}};
  ChatResponse response = client.Complete(request);
  CHECK(response.content == "the answer");
  CHECK(response.finish_reason == "length");
  CHECK(response.prompt_tokens == 123);
  CHECK(response.completion_tokens == 45);
  CHECK(response.model == "fake-model");
  CHECK(response.request_id == "req-1");
  CHECK(response.attempts == 1);
  CHECK_FALSE(response.replayed);
  CHECK(response.raw["choices"][0]["message"]["content"] == "the answer");

  auto received = server.Requests();
  REQUIRE(received.size() == 1);
  CHECK(received[0].headers["authorization"] == "Bearer sk-test-secret-42");
  CHECK(received[0].headers["content-type"] == "application/json");
  const json& body = received[0].json;
  CHECK(body["model"] == "fake-model");
  CHECK(body["messages"] == request.messages);
  CHECK(body["temperature"] == 0.2);
  CHECK(body["max_tokens"] == 64);
  CHECK(body["seed"] == 7);
  CHECK(body["reasoning_effort"] == "low");
  CHECK(body["stream"] == false);
}

TEST_CASE("curl_chat_client: reasoning fields and null content", "[llm]") {
  FakeLlmServer server;
  json body = json::parse(OkBody("x"));
  body["choices"][0]["message"]["content"] = nullptr;
  body["choices"][0]["message"]["reasoning_content"] = "thinking...";
  server.Push({200, body.dump(), {}, 0});
  CurlChatClient client(TestEndpoint(server));
  ChatResponse response = client.Complete(Hello());
  CHECK(response.content.empty());
  CHECK(response.reasoning == "thinking...");
}

TEST_CASE("curl_chat_client: 429 with Retry-After is retried after the requested delay", "[llm]") {
  FakeLlmServer server;
  server.Push({429, ErrorBody("rate limited"), {{"Retry-After", "1"}}, 0});
  server.Push({200, OkBody("after wait"), {}, 0});
  CurlChatClient client(TestEndpoint(server));
  const auto start = std::chrono::steady_clock::now();
  ChatResponse response = client.Complete(Hello());
  CHECK(MsSince(start) >= 950);
  CHECK(response.content == "after wait");
  CHECK(response.attempts == 2);
  CHECK(response.latency_ms >= 950);
  CHECK(server.Requests().size() == 2);
}

TEST_CASE("curl_chat_client: 5xx is retried with backoff", "[llm]") {
  FakeLlmServer server;
  server.Push({500, ErrorBody("boom"), {}, 0});
  server.Push({503, "upstream unavailable", {}, 0});
  server.Push({200, OkBody("third time"), {}, 0});
  CurlChatClient client(TestEndpoint(server));
  ChatResponse response = client.Complete(Hello());
  CHECK(response.content == "third time");
  CHECK(response.attempts == 3);

  SECTION("and gives up as llm_server after max_retries") {
    server.SetDefault({502, ErrorBody("still down"), {}, 0});
    LlmError error = ErrorOf(client, Hello("again"));
    CHECK(error.kind == ErrorKind::kServer);
    CHECK(error.status == 502);
    CHECK(error.attempts == 3);
    CHECK_THAT(error.message, Catch::Contains("still down"));
    CHECK(server.Requests().size() == 6);
  }
}

TEST_CASE("curl_chat_client: an attempt that times out is retried", "[llm]") {
  FakeLlmServer server;
  server.Push({200, OkBody("too late"), {}, 700});
  server.Push({200, OkBody("in time"), {}, 0});
  EndpointConfig config = TestEndpoint(server);
  config.timeout_ms = 300;
  config.connect_timeout_ms = 300;
  CurlChatClient client(config);
  const auto start = std::chrono::steady_clock::now();
  ChatResponse response = client.Complete(Hello());
  CHECK(response.content == "in time");
  CHECK(response.attempts == 2);
  CHECK(MsSince(start) >= 300);
  CHECK(MsSince(start) < 700);

  SECTION("and fails as llm_timeout when every attempt times out") {
    server.SetDefault({200, OkBody("never"), {}, 500});
    config.max_retries = 1;
    CurlChatClient impatient(config);
    LlmError error = ErrorOf(impatient, Hello("slow"));
    CHECK(error.kind == ErrorKind::kTimeout);
    CHECK(error.attempts == 2);
    CHECK_THAT(error.message, Catch::Contains("300 ms"));
  }
}

TEST_CASE("curl_chat_client: the deadline bounds the whole request across retries", "[llm]") {
  FakeLlmServer server;
  server.SetDefault({500, ErrorBody("down"), {}, 0});
  EndpointConfig config = TestEndpoint(server);
  config.max_retries = 50;
  config.initial_retry_delay_ms = 100;
  config.max_retry_delay_ms = 100;
  config.deadline_ms = 700;
  CurlChatClient client(config);
  const auto start = std::chrono::steady_clock::now();
  LlmError error = ErrorOf(client, Hello());
  const int64_t took = MsSince(start);
  CHECK(error.kind == ErrorKind::kServer);  // the last failure's kind, not a timeout
  CHECK_THAT(error.message, Catch::Contains("deadline of 700 ms"));
  CHECK(error.attempts >= 3);
  CHECK(error.attempts < 51);
  CHECK(took < 1500);  // 50 retries at ~75-100 ms each would take > 3.7 s

  SECTION("and cuts an attempt that would run past it") {
    server.SetDefault({200, OkBody("too late"), {}, 1500});
    config.max_retries = 2;
    config.deadline_ms = 400;
    CurlChatClient bounded(config);
    const auto begin = std::chrono::steady_clock::now();
    LlmError slow = ErrorOf(bounded, Hello("slow"));
    CHECK(slow.kind == ErrorKind::kTimeout);
    CHECK_THAT(slow.message, Catch::Contains("400 ms deadline"));
    CHECK(MsSince(begin) < 1200);  // the 2000 ms per-attempt timeout alone would allow 1500 ms
  }
}

TEST_CASE("curl_chat_client: 400 fails at once with the server's message", "[llm]") {
  FakeLlmServer server;
  server.Push({400, ErrorBody("messages[1].content must be a string"), {}, 0});
  CurlChatClient client(TestEndpoint(server));
  LlmError error = ErrorOf(client, Hello());
  CHECK(error.kind == ErrorKind::kClient);
  CHECK(error.status == 400);
  CHECK(error.attempts == 1);
  CHECK(error.message == "messages[1].content must be a string");
  CHECK_THAT(std::string(error.what()), Catch::StartsWith("llm_client: HTTP 400: messages[1]"));
  CHECK(server.Requests().size() == 1);
  CHECK(error.ToJson() == json{{"kind", "llm_client"},
                               {"message", "messages[1].content must be a string"},
                               {"details", {{"status", 400}, {"attempts", 1}}}});
}

TEST_CASE("curl_chat_client: the API key never appears in error messages", "[llm]") {
  FakeLlmServer server;
  server.Push({401, ErrorBody("Incorrect API key provided: sk-test-secret-42"), {}, 0});
  CurlChatClient client(TestEndpoint(server));
  LlmError error = ErrorOf(client, Hello());
  CHECK(error.kind == ErrorKind::kClient);
  CHECK(error.message == "Incorrect API key provided: [REDACTED]");
}

TEST_CASE("curl_chat_client: unusable 200 bodies are llm_bad_output", "[llm]") {
  FakeLlmServer server;
  CurlChatClient client(TestEndpoint(server));
  SECTION("invalid JSON is retried once, then reported") {
    server.SetDefault({200, "{\"choices\": [", {}, 0});
    LlmError error = ErrorOf(client, Hello());
    CHECK(error.kind == ErrorKind::kBadOutput);
    CHECK(error.attempts == 2);
    CHECK_THAT(error.message, Catch::Contains("not valid JSON"));
    CHECK(server.Requests().size() == 2);
  }
  SECTION("no choices[0].message") {
    server.SetDefault({200, R"({"id": "x", "choices": []})", {}, 0});
    LlmError error = ErrorOf(client, Hello());
    CHECK(error.kind == ErrorKind::kBadOutput);
    CHECK_THAT(error.message, Catch::Contains("choices[0]"));
  }
  SECTION("a bad body followed by a good one succeeds") {
    server.Push({200, "<html>proxy error</html>", {}, 0});
    server.Push({200, OkBody("fine"), {}, 0});
    CHECK(client.Complete(Hello()).content == "fine");
  }
}

TEST_CASE("curl_chat_client: connection refused is llm_connection", "[llm]") {
  int dead_port = 0;
  {
    FakeLlmServer gone;
    dead_port = gone.port();
  }
  EndpointConfig config;
  config.name = "dead";
  config.base_url = "http://127.0.0.1:" + std::to_string(dead_port) + "/v1";
  config.model = "m";
  config.max_retries = 1;
  config.initial_retry_delay_ms = 10;
  config.max_retry_delay_ms = 10;
  config.timeout_ms = 1000;
  config.connect_timeout_ms = 500;
  CurlChatClient client(config);
  LlmError error = ErrorOf(client, Hello());
  CHECK(error.kind == ErrorKind::kConnection);
  CHECK(error.attempts == 2);
}

TEST_CASE("curl_chat_client: concurrency is capped at max_concurrency", "[llm]") {
  FakeLlmServer server;
  server.SetDefault({200, OkBody("parallel"), {}, 150});
  EndpointConfig config = TestEndpoint(server);
  config.max_concurrency = 2;
  CurlChatClient client(config);
  std::vector<ChatRequest> batch;
  for (int i = 0; i < 6; ++i) batch.push_back(Hello("q" + std::to_string(i)));
  const auto start = std::chrono::steady_clock::now();
  std::vector<Outcome> outcomes = client.CompleteMany(batch);
  REQUIRE(outcomes.size() == 6);
  for (const auto& outcome : outcomes) {
    REQUIRE(outcome.ok());
    CHECK(outcome.response->content == "parallel");
  }
  CHECK(server.MaxConcurrent() == 2);
  CHECK(MsSince(start) >= 3 * 150 - 20);
  // Order of outcomes follows the order of requests.
  auto received = server.Requests();
  CHECK(received.size() == 6);
}

TEST_CASE("curl_chat_client: CompleteMany reports per-request errors", "[llm]") {
  FakeLlmServer server;
  server.Push({400, ErrorBody("nope"), {}, 0});
  EndpointConfig config = TestEndpoint(server);
  config.max_concurrency = 1;
  CurlChatClient client(config);
  auto outcomes = client.CompleteMany({Hello("a"), Hello("b")});
  REQUIRE(outcomes.size() == 2);
  REQUIRE_FALSE(outcomes[0].ok());
  CHECK(outcomes[0].error->kind == ErrorKind::kClient);
  REQUIRE(outcomes[1].ok());
  CHECK(outcomes[1].response->content == "ok");
}

TEST_CASE("curl_chat_client: unset api_key_env is a config error", "[llm]") {
  EndpointConfig config;
  config.name = "needs-key";
  config.base_url = "http://127.0.0.1:1/v1";
  config.model = "m";
  config.api_key_env = "ACCELOPT_TEST_SURELY_UNSET_KEY";
  try {
    CurlChatClient client(config);
    FAIL("expected llm_config");
  } catch (const LlmError& error) {
    CHECK(error.kind == ErrorKind::kConfig);
    CHECK_THAT(error.message, Catch::Contains("ACCELOPT_TEST_SURELY_UNSET_KEY"));
  }
}
