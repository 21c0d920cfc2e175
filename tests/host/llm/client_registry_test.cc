#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "host/llm/fake_llm_server.h"
#include "llm/client_registry.h"
#include "llm/curl_chat_client.h"
#include "llm/scripted_chat_client.h"
#include "host/llm/llm_test_env.h"

using namespace accelopt::llm;
using accelopt::llm::testing::FakeLlmServer;
using accelopt::llm::testing::OkBody;
using nlohmann::json;
using accelopt::llm::testing::MapEnv;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("accelopt-llm-reg-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

ChatRequest Ask(const std::string& endpoint, const std::string& text, const std::string& stage = "plan") {
  ChatRequest request;
  request.endpoint = endpoint;
  request.stage = stage;
  request.messages = json::array({{{"role", "user"}, {"content", text}}});
  return request;
}

}  // namespace

TEST_CASE("scripted_chat_client: replies, errors and recorded requests", "[llm]") {
  ScriptedChatClient client;
  client.PushReply("one", 3, 4);
  client.PushError(LlmError(ErrorKind::kServer, 503, "down"));
  ChatResponse first = client.Complete(Ask("x", "a"));
  CHECK(first.content == "one");
  CHECK(first.prompt_tokens == 3);
  CHECK(first.raw["choices"][0]["message"]["content"] == "one");
  try {
    client.Complete(Ask("x", "b"));
    FAIL("expected error");
  } catch (const LlmError& error) {
    CHECK(error.kind == ErrorKind::kServer);
    CHECK(error.status == 503);
  }
  try {
    client.Complete(Ask("x", "c"));
    FAIL("expected error");
  } catch (const LlmError& error) {
    CHECK(error.kind == ErrorKind::kReplayMiss);
  }
  client.SetResponder([](const ChatRequest& request) {
    ChatResponse response;
    response.content = "echo " + request.messages[0]["content"].get<std::string>();
    return response;
  });
  CHECK(client.Complete(Ask("x", "d")).content == "echo d");
  auto requests = client.Requests();
  REQUIRE(requests.size() == 4);
  CHECK(requests[1].messages[0]["content"] == "b");
  CHECK(client.Remaining() == 0);
}

TEST_CASE("client_registry: live endpoints, transcript and ledger", "[llm]") {
  TempDir dir;
  json block = {{"default", {{"base_url", "http://unused.invalid/v1"}, {"model", "big"}, {"price_per_mtok_in", 1.0}}},
                {"cheap", {{"base_url", "http://unused.invalid/v1"}, {"model", "small"}, {"max_concurrency", 3}}}};
  std::map<std::string, ScriptedChatClient*> fakes;
  RegistryOptions options;
  options.run_dir = dir.path;
  options.env = MapEnv({});
  options.live_factory = [&](const EndpointConfig& config) {
    auto fake = std::make_unique<ScriptedChatClient>(config);
    fake->PushReply("from " + config.name, 1000, 10);
    fakes[config.name] = fake.get();
    return fake;
  };
  ClientRegistry registry(block, options);
  CHECK(registry.Names() == std::vector<std::string>{"cheap", "default"});
  CHECK_FALSE(registry.Replaying());
  CHECK(registry.Config("cheap").max_concurrency == 3);
  CHECK(registry.Get("cheap").MaxConcurrency() == 3);
  CHECK(registry.Get("default").Complete(Ask("default", "hi")).content == "from default");
  CHECK(registry.Get("cheap").Complete(Ask("cheap", "hi", "summarize")).content == "from cheap");
  CHECK(registry.Ledger().Total().requests == 2);
  CHECK(registry.Ledger().ForStage("plan").cost_usd == Approx(0.001));
  REQUIRE(registry.TranscriptPath().has_value());
  CHECK(*registry.TranscriptPath() == dir.path / "llm" / "transcript.jsonl");
  CHECK(fs::exists(*registry.TranscriptPath()));
  CHECK(registry.Describe()["mode"] == "live");

  try {
    registry.Get("fancy");
    FAIL("expected llm_config");
  } catch (const LlmError& error) {
    CHECK(error.kind == ErrorKind::kConfig);
    CHECK_THAT(error.message, Catch::Contains("unknown LLM endpoint 'fancy'") && Catch::Contains("cheap, default"));
  }
}

TEST_CASE("client_registry: configuration errors", "[llm]") {
  RegistryOptions options;
  options.env = MapEnv({});
  options.live_factory = [](const EndpointConfig& config) { return std::make_unique<ScriptedChatClient>(config); };
  CHECK_THROWS_WITH(ClientRegistry(json::array(), options), Catch::Contains("llm: expected an object"));
  CHECK_THROWS_WITH(ClientRegistry(json{{"default", {{"base_url", "ftp://h"}, {"model", "m"}}}}, options),
                    Catch::Contains("llm.default.base_url"));
  CHECK_THROWS_WITH(ClientRegistry(json{{"default", {{"base_url", "http://h/v1"}}}}, options),
                    Catch::Contains("llm.default.model: required"));
  CHECK_THROWS_WITH(ClientRegistry(json{{"replay", "/nonexistent/transcript.jsonl"}}, options),
                    Catch::Contains("cannot read LLM transcript"));
  // No block, but the environment names a server: a "default" endpoint appears.
  options.env = MapEnv({{"ACCELOPT_LLM_BASE_URL", "http://h/v1"}, {"ACCELOPT_LLM_MODEL", "m"}});
  ClientRegistry from_env(nullptr, options);
  CHECK(from_env.Names() == std::vector<std::string>{"default"});
  CHECK(from_env.Config("default").model == "m");
}

TEST_CASE("client_registry: record over HTTP, then replay without a server", "[llm]") {
  GlobalInit();
  TempDir dir;
  const fs::path record_dir = dir.path / "run1";
  std::vector<ChatResponse> live;
  {
    FakeLlmServer server;
    server.Push({200, OkBody("plan: tile by 128", 50, 20), {}, 0});
    server.Push({200, OkBody("summary", 30, 5), {}, 0});
    json block = {{"default", {{"base_url", server.BaseUrl()}, {"model", "fake-model"}, {"api_key_env", "TEST_KEY"},
                               {"timeout", "2s"}, {"price_per_mtok_out", 1.0}}}};
    RegistryOptions options;
    options.run_dir = record_dir;
    options.env = MapEnv({{"TEST_KEY", "sk-registry-key-1"}});
    ClientRegistry registry(block, options);
    live.push_back(registry.Get("default").Complete(Ask("default", "plan please")));
    live.push_back(registry.Get("default").Complete(Ask("default", "summarize", "summarize")));
  }
  const fs::path transcript = TranscriptPathFor(record_dir);
  {
    std::ifstream in(transcript);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text.find("sk-registry-key-1") == std::string::npos);
  }

  // Replay: the block names only the transcript; the model comes from the recordings.
  RegistryOptions options;
  options.run_dir = dir.path / "run2";
  options.env = MapEnv({});
  ClientRegistry replay(json{{"replay", transcript.string()}}, options);
  CHECK(replay.Replaying());
  CHECK(replay.Names() == std::vector<std::string>{"default"});
  ChatResponse first = replay.Get("default").Complete(Ask("default", "plan please"));
  ChatResponse second = replay.Get("default").Complete(Ask("default", "summarize", "summarize"));
  CHECK(first.content == live[0].content);
  CHECK(first.raw == live[0].raw);
  CHECK(first.prompt_tokens == 50);
  CHECK(first.replayed);
  CHECK(second.content == "summary");
  CHECK(replay.Ledger().Total().replayed_requests == 2);
  try {
    replay.Get("default").Complete(Ask("default", "plan pleas"));
    FAIL("expected a replay miss");
  } catch (const LlmError& error) {
    CHECK(error.kind == ErrorKind::kReplayMiss);
    CHECK_THAT(error.message, Catch::Contains("messages[0].content differs (at character 10)"));
  }
  // The replaying run writes its own transcript (a replay of a replay works).
  REQUIRE(replay.TranscriptPath().has_value());
  std::ifstream again(*replay.TranscriptPath());
  int lines = 0;
  for (std::string line; std::getline(again, line);) ++lines;
  CHECK(lines == 2);
}

TEST_CASE("client_registry: on resume, recorded replies are reused and only new requests go live", "[llm][resume]") {
  TempDir dir;
  json block = {{"default", {{"base_url", "http://127.0.0.1:1/v1"}, {"model", "m"}}}};
  ScriptedChatClient* live = nullptr;
  auto factory = [&](const EndpointConfig& config) {
    auto fake = std::make_unique<ScriptedChatClient>(config);
    fake->PushReply("first answer", 10, 5);
    live = fake.get();
    return fake;
  };
  RegistryOptions first;
  first.run_dir = dir.path;
  first.env = MapEnv({});
  first.live_factory = factory;
  {
    ClientRegistry registry(block, first);
    CHECK(registry.Get("default").Complete(Ask("default", "a")).content == "first answer");
  }

  RegistryOptions resumed = first;
  resumed.resume_transcript = TranscriptPathFor(dir.path);
  ClientRegistry registry(block, resumed);
  ChatResponse again = registry.Get("default").Complete(Ask("default", "a"));
  CHECK(again.content == "first answer");
  CHECK(again.replayed);
  CHECK(live->Requests().empty());  // the recorded reply was not requested again
  CHECK(registry.Get("default").Complete(Ask("default", "b")).content == "first answer");
  CHECK(live->Requests().size() == 1);  // a new request goes live
}
