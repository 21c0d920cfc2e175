// The OpenAI SDKs' environment conventions (docs/llm.md, "Environment overrides"):
// OPENAI_BASE_URL and OPENAI_API_KEY are honoured as openai-python honours them (an
// explicit value - here the llm: block's - wins over the environment, the default base
// URL is https://api.openai.com/v1), and the ACCELOPT_LLM_* variables win over both.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "llm/client_registry.h"
#include "llm/endpoint_config.h"
#include "llm/scripted_chat_client.h"
#include "host/llm/llm_test_env.h"

using namespace accelopt::llm;
using nlohmann::json;
using accelopt::llm::testing::MapEnv;

namespace {

// Sets (or unsets, with nullopt) process environment variables for its lifetime and
// restores every one of them, set or unset, afterwards.
class ScopedEnv {
 public:
  using Values = std::map<std::string, std::optional<std::string>>;
  explicit ScopedEnv(const Values& values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name.c_str());
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else ::unsetenv(it->first.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Every variable that decides an endpoint's base URL, model or key, unset.
std::map<std::string, std::optional<std::string>> Clean() {
  return {{"OPENAI_BASE_URL", std::nullopt},       {"OPENAI_API_KEY", std::nullopt},
          {"ACCELOPT_LLM_BASE_URL", std::nullopt}, {"ACCELOPT_LLM_MODEL", std::nullopt},
          {"ACCELOPT_LLM_API_KEY", std::nullopt},  {"ACCELOPT_LLM_DEFAULT_BASE_URL", std::nullopt},
          {"ACCELOPT_LLM_DEFAULT_MODEL", std::nullopt}, {"ACCELOPT_LLM_DEFAULT_API_KEY", std::nullopt}};
}

const json kNoUrl = {{"model", "gpt-4o-mini"}};

}  // namespace

TEST_CASE("env conventions: base_url from the block, then OPENAI_BASE_URL, then OpenAI's default", "[llm][env]") {
  SECTION("no base_url anywhere: https://api.openai.com/v1, as the SDKs") {
    EndpointConfig config = ParseEndpoint("default", kNoUrl, MapEnv({}));
    CHECK(config.base_url == "https://api.openai.com/v1");
    CHECK(config.base_url_source == "default");
    CHECK(config.ChatCompletionsUrl() == "https://api.openai.com/v1/chat/completions");
  }
  SECTION("an endpoint without base_url uses OPENAI_BASE_URL") {
    EndpointConfig config = ParseEndpoint("default", kNoUrl, MapEnv({{"OPENAI_BASE_URL", "http://10.0.0.7:8000/v1/"}}));
    CHECK(config.base_url == "http://10.0.0.7:8000/v1");
    CHECK(config.base_url_source == "OPENAI_BASE_URL");
    CHECK(config.ToRedactedJson()["base_url_source"] == "OPENAI_BASE_URL");
  }
  SECTION("the block's base_url wins over OPENAI_BASE_URL (an explicit argument wins over the environment)") {
    json spec = kNoUrl;
    spec["base_url"] = "http://127.0.0.1:8000/v1";
    EndpointConfig config = ParseEndpoint("default", spec, MapEnv({{"OPENAI_BASE_URL", "http://10.0.0.7:8000/v1"}}));
    CHECK(config.base_url == "http://127.0.0.1:8000/v1");
    CHECK(config.base_url_source == "llm block");
  }
  SECTION("ACCELOPT_LLM_BASE_URL overrides everything; the per-endpoint name wins over it") {
    json spec = kNoUrl;
    spec["base_url"] = "http://127.0.0.1:8000/v1";
    auto env = MapEnv({{"OPENAI_BASE_URL", "http://openai-env/v1"}, {"ACCELOPT_LLM_BASE_URL", "http://accelopt-env/v1"}});
    CHECK(ParseEndpoint("default", spec, env).base_url == "http://accelopt-env/v1");
    CHECK(ParseEndpoint("default", spec, env).base_url_source == "ACCELOPT_LLM_BASE_URL");
    CHECK(ParseEndpoint("default", kNoUrl, env).base_url == "http://accelopt-env/v1");
    auto both = MapEnv({{"ACCELOPT_LLM_BASE_URL", "http://global/v1"}, {"ACCELOPT_LLM_DEFAULT_BASE_URL", "http://mine/v1"}});
    CHECK(ParseEndpoint("default", spec, both).base_url == "http://mine/v1");
  }
  SECTION("a malformed OPENAI_BASE_URL is an error that says where it came from") {
    try {
      ParseEndpoint("default", kNoUrl, MapEnv({{"OPENAI_BASE_URL", "127.0.0.1:8000/v1"}}));
      FAIL("expected llm_config");
    } catch (const LlmError& error) {
      CHECK(error.kind == ErrorKind::kConfig);
      CHECK_THAT(error.message, Catch::Contains("llm.default.base_url") && Catch::Contains("from OPENAI_BASE_URL"));
    }
  }
}

TEST_CASE("env conventions: OPENAI_API_KEY is the SDKs' key; ACCELOPT_LLM_API_KEY wins", "[llm][env]") {
  CHECK(ParseEndpoint("default", kNoUrl, MapEnv({{"OPENAI_API_KEY", "sk-openai"}})).api_key == "sk-openai");
  CHECK(ParseEndpoint("default", kNoUrl, MapEnv({{"OPENAI_API_KEY", "sk-openai"}})).api_key_source == "OPENAI_API_KEY");
  EndpointConfig both =
      ParseEndpoint("default", kNoUrl, MapEnv({{"OPENAI_API_KEY", "sk-openai"}, {"ACCELOPT_LLM_API_KEY", "sk-accelopt"}}));
  CHECK(both.api_key == "sk-accelopt");
  CHECK(both.api_key_source == "ACCELOPT_LLM_API_KEY");
  // An endpoint configured for another variable never gets OPENAI_API_KEY.
  json own = kNoUrl;
  own["api_key_env"] = "OTHER_KEY";
  CHECK(ParseEndpoint("default", own, MapEnv({{"OPENAI_API_KEY", "sk-openai"}})).api_key.empty());
}

TEST_CASE("env conventions: an endpoint from the environment alone needs a model and a server", "[llm][env]") {
  RegistryOptions options;
  options.live_factory = [](const EndpointConfig& config) { return std::make_unique<ScriptedChatClient>(config); };
  options.env = MapEnv({{"ACCELOPT_LLM_MODEL", "m"}, {"OPENAI_BASE_URL", "http://10.0.0.7:8000/v1"}});
  ClientRegistry from_openai_url(nullptr, options);
  REQUIRE(from_openai_url.Names() == std::vector<std::string>{"default"});
  CHECK(from_openai_url.Config("default").base_url == "http://10.0.0.7:8000/v1");
  // A model name alone does not turn a rules run into requests to api.openai.com.
  options.env = MapEnv({{"ACCELOPT_LLM_MODEL", "m"}, {"OPENAI_API_KEY", "sk-openai"}});
  CHECK(ClientRegistry(nullptr, options).Names().empty());
  options.env = MapEnv({{"OPENAI_BASE_URL", "http://10.0.0.7:8000/v1"}, {"OPENAI_API_KEY", "sk-openai"}});
  CHECK(ClientRegistry(nullptr, options).Names().empty());
}

TEST_CASE("env conventions: the process environment (set and restored around the test)", "[llm][env]") {
  ScopedEnv clean(Clean());
  {
    ScopedEnv env(ScopedEnv::Values{{"OPENAI_BASE_URL", "http://from-openai-env:9000/v1"}, {"OPENAI_API_KEY", "sk-process-openai"}});
    EndpointConfig config = ParseEndpoint("default", kNoUrl, ProcessEnv());
    CHECK(config.base_url == "http://from-openai-env:9000/v1");
    CHECK(config.api_key == "sk-process-openai");
    {
      ScopedEnv accelopt(
          ScopedEnv::Values{{"ACCELOPT_LLM_BASE_URL", "http://from-accelopt-env/v1"}, {"ACCELOPT_LLM_API_KEY", "sk-process-accelopt"}});
      EndpointConfig overridden = ParseEndpoint("default", kNoUrl, ProcessEnv());
      CHECK(overridden.base_url == "http://from-accelopt-env/v1");
      CHECK(overridden.api_key == "sk-process-accelopt");
    }
    CHECK(std::getenv("ACCELOPT_LLM_BASE_URL") == nullptr);  // restored: unset again
    ScopedEnv empty(ScopedEnv::Values{{"OPENAI_BASE_URL", ""}});  // an empty variable counts as unset
    CHECK(ParseEndpoint("default", kNoUrl, ProcessEnv()).base_url == "https://api.openai.com/v1");
  }
  CHECK(std::getenv("OPENAI_BASE_URL") == nullptr);
  CHECK(std::getenv("OPENAI_API_KEY") == nullptr);
  CHECK(ParseEndpoint("default", kNoUrl, ProcessEnv()).base_url == "https://api.openai.com/v1");
}
