// The LLM client bounds what a server can make it hold (issue 34): a reply
// body over the endpoint's max_response_bytes (default 16 MiB) ends the
// request with llm_bad_output, read no further than the cap, and is not
// retried. Servers are local (127.0.0.1, ephemeral ports).
#include <catch2/catch.hpp>

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "host/llm/fake_llm_server.h"
#include "llm/curl_chat_client.h"
#include "llm/endpoint_config.h"

using namespace accelopt::llm;
using accelopt::llm::testing::FakeLlmServer;
using accelopt::llm::testing::OkBody;
using nlohmann::json;

namespace {

EnvLookup NoEnv() {
  return [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
}

// An endpoint of `base_url` parsed as a pipeline's llm: block would be, plus `extra_fields`.
EndpointConfig Endpoint(const std::string& base_url, json extra_fields = json::object()) {
  GlobalInit();
  json spec = {{"base_url", base_url}, {"model", "fake-model"}, {"timeout", "20s"}, {"max_retries", 2},
               {"initial_retry_delay", "10ms"}, {"max_retry_delay", "20ms"}};
  spec.update(extra_fields);
  return ParseEndpoint("default", spec, NoEnv());
}

ChatRequest Hello() {
  ChatRequest request;
  request.endpoint = "default";
  request.stage = "plan";
  request.messages = json::array({{{"role", "user"}, {"content", "hello"}}});
  return request;
}

LlmError ErrorOf(ChatClient& client) {
  try {
    client.Complete(Hello());
  } catch (const LlmError& error) {
    return error;
  }
  FAIL("expected an LlmError");
  return LlmError(ErrorKind::kConfig, 0, "unreachable");
}

std::string ConfigErrorOf(const json& fields) {
  try {
    Endpoint("http://127.0.0.1:9/v1", fields);
  } catch (const LlmError& error) {
    CHECK(error.kind == ErrorKind::kConfig);
    return error.message;
  }
  FAIL("expected an llm_config error for " << fields.dump());
  return "";
}

// A server whose reply is an endless chunked body ("aaaa..."), stopped by the
// test after `limit` bytes; counts what it sent.
class EndlessServer {
 public:
  explicit EndlessServer(size_t limit) {
    server_.Post("/v1/chat/completions", [this, limit](const httplib::Request&, httplib::Response& res) {
      ++requests_;
      res.set_chunked_content_provider("application/json", [this, limit](size_t, httplib::DataSink& sink) {
        static const std::string chunk(1 << 16, 'a');
        if (sent_ >= limit) {
          sink.done();
          return true;
        }
        if (!sink.write(chunk.data(), chunk.size())) return false;
        sent_ += chunk.size();
        return true;
      });
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 500 && !server_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ~EndlessServer() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::string BaseUrl() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  size_t sent() const { return sent_; }
  int requests() const { return requests_; }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<size_t> sent_{0};
  std::atomic<int> requests_{0};
};

}  // namespace

TEST_CASE("llm: a reply body over the default 16 MiB cap is refused, not held", "[llm][security]") {
  FakeLlmServer server;
  // A well-formed reply of 24 MiB: over the default cap although it parses.
  server.SetDefault({200, OkBody(std::string(24u << 20, 'x')), {}, 0});
  EndpointConfig config = Endpoint(server.BaseUrl());
  CurlChatClient client(config);
  LlmError error = ErrorOf(client);
  CHECK(error.kind == ErrorKind::kBadOutput);
  CHECK_THAT(error.message, Catch::Contains("max_response_bytes") && Catch::Contains("16777216"));
  CHECK(error.attempts == 1);  // the same server would send it again: not retried
  CHECK(server.Requests().size() == 1);

  // A reply under the cap still works.
  server.SetDefault({200, OkBody(std::string(1u << 20, 'y')), {}, 0});
  CHECK(client.Complete(Hello()).content.size() == (1u << 20));
}

TEST_CASE("llm: max_response_bytes in the llm: block bounds an endless reply", "[llm][security]") {
  // Stopped by the server at 256 MiB should the client not stop it first.
  EndlessServer server(256u << 20);
  EndpointConfig config = Endpoint(server.BaseUrl(), {{"max_response_bytes", "1MiB"}});
  CHECK(config.ToRedactedJson()["max_response_bytes"] == (1 << 20));
  CurlChatClient client(config);
  auto start = std::chrono::steady_clock::now();
  LlmError error = ErrorOf(client);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(error.kind == ErrorKind::kBadOutput);
  CHECK_THAT(error.message, Catch::Contains("llm.default.max_response_bytes") && Catch::Contains("1048576") &&
                                Catch::Contains(server.BaseUrl()));
  CHECK(server.requests() == 1);
  // The client stopped reading at the cap: the server could not send much more
  // than the cap plus what the socket buffers held.
  CHECK(server.sent() < (64u << 20));
}

TEST_CASE("llm: max_response_bytes accepts bytes or a size with a unit, and names itself in errors", "[llm]") {
  CHECK(Endpoint("http://127.0.0.1:9/v1").ToRedactedJson()["max_response_bytes"] == (16ll << 20));
  CHECK(Endpoint("http://127.0.0.1:9/v1", {{"max_response_bytes", 65536}}).ToRedactedJson()["max_response_bytes"] == 65536);
  CHECK(Endpoint("http://127.0.0.1:9/v1", {{"max_response_bytes", "64MiB"}}).ToRedactedJson()["max_response_bytes"] == (64ll << 20));
  CHECK(Endpoint("http://127.0.0.1:9/v1", {{"max_response_bytes", "2M"}}).ToRedactedJson()["max_response_bytes"] == (2ll << 20));
  CHECK(Endpoint("http://127.0.0.1:9/v1", {{"max_response_bytes", "1G"}}).ToRedactedJson()["max_response_bytes"] == (1ll << 30));
  CHECK(Endpoint("http://127.0.0.1:9/v1", {{"max_response_bytes", "512k"}}).ToRedactedJson()["max_response_bytes"] == (512ll << 10));
  for (const json& bad : {json(0), json(-5), json(100), json("lots"), json("5TiB"), json(true), json(1.5)}) {
    INFO(bad.dump());
    CHECK_THAT(ConfigErrorOf({{"max_response_bytes", bad}}), Catch::Contains("llm.default.max_response_bytes"));
  }
}
