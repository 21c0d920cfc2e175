#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "host/llm/fake_llm_server.h"
#include "llm/curl_chat_client.h"
#include "llm/scripted_chat_client.h"
#include "llm/transcript.h"

using namespace accelopt::llm;
using accelopt::llm::testing::ErrorBody;
using accelopt::llm::testing::FakeLlmServer;
using accelopt::llm::testing::OkBody;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("accelopt-llm-test-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<json> ReadLines(const fs::path& path) {
  std::vector<json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines.push_back(json::parse(line));
  return lines;
}

EndpointConfig Endpoint(const std::string& model = "m1") {
  EndpointConfig config;
  config.name = "default";
  config.base_url = "http://127.0.0.1:9/v1";
  config.model = model;
  config.temperature = 0.5;
  config.price_per_mtok_in = 2.0;
  config.price_per_mtok_out = 10.0;
  return config;
}

ChatRequest Ask(const std::string& question, const std::string& stage = "plan") {
  ChatRequest request;
  request.endpoint = "default";
  request.stage = stage;
  request.messages = json::array({{{"role", "system"}, {"content", "You optimise kernels."}},
                                  {{"role", "user"}, {"content", question}}});
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

}  // namespace

TEST_CASE("transcript: sha256 and canonical request keys", "[llm]") {
  CHECK(Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");

  json a = TranscriptRequest(Ask("q"), Endpoint());
  CHECK(a["endpoint"] == "default");
  CHECK(a["model"] == "m1");
  CHECK(a["temperature"] == 0.5);
  json b = a;
  b["endpoint"] = "other";
  b["user"] = "someone";
  b["metadata"] = {{"run", 3}};
  CHECK(RequestKey(a) == RequestKey(b));  // endpoint and volatile fields do not count
  // Key order in the input does not matter (objects dump sorted).
  json reordered = json::parse(R"({"temperature": 0.5, "stream": false, "model": "m1", "messages": [
      {"content": "You optimise kernels.", "role": "system"}, {"role": "user", "content": "q"}]})");
  CHECK(RequestKey(a) == RequestKey(reordered));
  json c = a;
  c["seed"] = 1;
  CHECK(RequestKey(a) != RequestKey(c));
  CHECK(RequestKey(a).size() == 64);
}

TEST_CASE("transcript: DescribeDifferences names paths", "[llm]") {
  json recorded = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "abcdef"}}}}, {"seed", 7}};
  json actual = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "abcXef"}}}}, {"top_p", 0.9}};
  auto diff = DescribeDifferences(actual, recorded);
  REQUIRE(diff.size() == 3);
  CHECK(diff[0] == "messages[0].content differs (at character 3)");
  CHECK(diff[1] == "top_p is not in the recorded request");
  CHECK(diff[2] == "seed is missing (recorded 7)");
  json longer = recorded;
  longer["messages"].push_back({{"role", "user"}, {"content", "more"}});
  CHECK(DescribeDifferences(longer, recorded) == std::vector<std::string>{"messages has 2 items, recorded 1"});
  CHECK(DescribeDifferences(recorded, recorded).empty());
}

TEST_CASE("transcript: recording writes one line per interaction and feeds the ledger", "[llm]") {
  TempDir dir;
  const fs::path path = dir.path / "llm" / "transcript.jsonl";
  auto writer = std::make_shared<TranscriptWriter>(path);
  auto ledger = std::make_shared<UsageLedger>();
  auto scripted = std::make_unique<ScriptedChatClient>();
  scripted->PushReply("first", 1000, 200);
  scripted->PushError(LlmError(ErrorKind::kRateLimit, 429, "slow down", 3));
  RecordingChatClient client(std::move(scripted), Endpoint(), writer, ledger);

  CHECK(client.Complete(Ask("one")).content == "first");
  CHECK(ErrorOf(client, Ask("two", "execute")).kind == ErrorKind::kRateLimit);

  auto lines = ReadLines(path);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["seq"] == 0);
  CHECK(lines[1]["seq"] == 1);
  CHECK(lines[0]["key"] == RequestKey(lines[0]["request"]));
  CHECK(lines[0]["request"]["messages"][1]["content"] == "one");
  CHECK(lines[0]["request"]["endpoint"] == "default");
  CHECK(lines[0]["response"]["status"] == 200);
  CHECK(lines[0]["response"]["body"]["choices"][0]["message"]["content"] == "first");
  CHECK(lines[0]["error"].is_null());
  CHECK(lines[0]["meta"]["stage"] == "plan");
  CHECK(lines[0]["meta"]["prompt_tokens"] == 1000);
  CHECK(lines[0]["meta"]["completion_tokens"] == 200);
  CHECK(lines[0]["meta"]["cost_usd"].get<double>() == Approx(0.004));  // 1000*2/1e6 + 200*10/1e6
  CHECK(lines[0]["meta"].contains("latency_ms"));
  CHECK(lines[0]["meta"]["attempts"] == 1);
  CHECK(lines[1]["error"]["kind"] == "llm_rate_limit");
  CHECK(lines[1]["error"]["status"] == 429);
  CHECK(lines[1]["meta"]["attempts"] == 3);
  CHECK(lines[1]["meta"]["stage"] == "execute");

  CHECK(ledger->Total().requests == 1);
  CHECK(ledger->Total().failed_requests == 1);
  CHECK(ledger->ForStage("plan").cost_usd == Approx(0.004));

  SECTION("a reopened transcript continues the seq numbers") {
    auto again = std::make_shared<TranscriptWriter>(path);
    CHECK(again->Append({{"key", "k"}, {"request", json::object()}}) == 2);
  }
}

TEST_CASE("transcript: Authorization is sent but never written", "[llm]") {
  GlobalInit();
  TempDir dir;
  FakeLlmServer server;
  server.Push({200, OkBody("secret-free"), {}, 0});
  server.Push({401, ErrorBody("Incorrect API key provided: sk-live-XYZ-987654"), {}, 0});
  EndpointConfig config = Endpoint();
  config.base_url = server.BaseUrl();
  config.api_key = "sk-live-XYZ-987654";
  config.timeout_ms = 2000;
  const fs::path path = dir.path / "transcript.jsonl";
  auto writer = std::make_shared<TranscriptWriter>(path);
  RecordingChatClient client(std::make_unique<CurlChatClient>(config), config, writer, nullptr);
  CHECK(client.Complete(Ask("hi")).content == "secret-free");
  CHECK(ErrorOf(client, Ask("again")).kind == ErrorKind::kClient);

  auto received = server.Requests();
  REQUIRE(received.size() == 2);
  CHECK(received[0].headers["authorization"] == "Bearer sk-live-XYZ-987654");
  const std::string text = ReadFile(path);
  CHECK(ReadLines(path).size() == 2);
  CHECK(text.find("sk-live-XYZ-987654") == std::string::npos);
  CHECK(text.find("Bearer") == std::string::npos);
  CHECK(text.find("uthorization") == std::string::npos);
  CHECK(text.find("[REDACTED]") != std::string::npos);  // the echoed key in the 401 message
}

TEST_CASE("transcript: replay answers identical requests in seq order", "[llm]") {
  TempDir dir;
  const fs::path path = dir.path / "transcript.jsonl";
  {
    auto writer = std::make_shared<TranscriptWriter>(path);
    auto scripted = std::make_unique<ScriptedChatClient>();
    scripted->PushReply("answer A1", 5, 6);
    scripted->PushReply("answer B", 7, 8);
    scripted->PushReply("answer A2", 9, 10);
    scripted->PushError(LlmError(ErrorKind::kClient, 400, "context too long", 1));
    RecordingChatClient recorder(std::move(scripted), Endpoint(), writer, nullptr);
    recorder.Complete(Ask("question A"));
    recorder.Complete(Ask("question B"));
    recorder.Complete(Ask("question A"));
    CHECK_THROWS_AS(recorder.Complete(Ask("huge")), LlmError);
  }

  auto store = ReplayStore::FromFile(path);
  CHECK(store->size() == 4);
  ReplayChatClient replay(store, Endpoint());
  ChatResponse a1 = replay.Complete(Ask("question A"));
  CHECK(a1.content == "answer A1");
  CHECK(a1.prompt_tokens == 5);
  CHECK(a1.replayed);
  CHECK(replay.Complete(Ask("question B")).content == "answer B");
  CHECK(replay.Complete(Ask("question A")).content == "answer A2");
  LlmError recorded = ErrorOf(replay, Ask("huge"));
  CHECK(recorded.kind == ErrorKind::kClient);
  CHECK(recorded.status == 400);
  CHECK(recorded.message == "context too long");

  SECTION("using up the recordings is a replay miss") {
    LlmError error = ErrorOf(replay, Ask("question A"));
    CHECK(error.kind == ErrorKind::kReplayMiss);
    CHECK_THAT(error.message, Catch::Contains("all 2 recorded response(s)") && Catch::Contains("already used"));
  }
  SECTION("repeat_last reuses the last recording") {
    ReplayChatClient repeating(ReplayStore::FromFile(path, /*repeat_last=*/true), Endpoint());
    repeating.Complete(Ask("question A"));
    repeating.Complete(Ask("question A"));
    CHECK(repeating.Complete(Ask("question A")).content == "answer A2");
  }
  SECTION("a changed request names what differs from the closest recording") {
    ChatRequest changed = Ask("question B");
    changed.messages[0]["content"] = "You optimise kernels!";
    LlmError error = ErrorOf(replay, changed);
    CHECK(error.kind == ErrorKind::kReplayMiss);
    CHECK_THAT(error.message, Catch::Contains("messages[0].content differs (at character 20)") &&
                                  Catch::Contains("closest recorded request (seq 1"));
  }
  SECTION("another model or temperature is a miss too") {
    ReplayChatClient other_model(store, Endpoint("m2"));
    CHECK_THAT(ErrorOf(other_model, Ask("question B")).message, Catch::Contains("model differs"));
    ChatRequest hotter = Ask("question B");
    hotter.temperature = 1.0;
    CHECK_THAT(ErrorOf(replay, hotter).message, Catch::Contains("temperature differs"));
  }
}

TEST_CASE("transcript: malformed transcript files are config errors naming the line", "[llm]") {
  TempDir dir;
  const fs::path path = dir.path / "bad.jsonl";
  {
    std::ofstream out(path);
    out << R"({"key": "k", "seq": 0, "request": {"model": "m"}, "response": {"status": 200, "body": {}}})" << "\n\n";
    out << "not json\n";
  }
  try {
    LoadTranscript(path);
    FAIL("expected llm_config");
  } catch (const LlmError& error) {
    CHECK(error.kind == ErrorKind::kConfig);
    CHECK_THAT(error.message, Catch::Contains("bad.jsonl:3"));
  }
  CHECK_THROWS_AS(LoadTranscript(dir.path / "missing.jsonl"), LlmError);
}
