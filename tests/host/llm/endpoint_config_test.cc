#include <catch2/catch.hpp>

#include <map>

#include "llm/endpoint_config.h"
#include "llm/llm_error.h"
#include "host/llm/llm_test_env.h"

using namespace accelopt::llm;
using nlohmann::json;
using accelopt::llm::testing::MapEnv;
using accelopt::llm::testing::ConfigErrorOf;

namespace {

const json kSpec = {{"base_url", "http://127.0.0.1:8000/v1/"},
                    {"model", "gpt-oss-120b"},
                    {"api_key_env", "MY_KEY"},
                    {"max_concurrency", 3},
                    {"timeout", "2m"},
                    {"max_retries", 4},
                    {"temperature", 0.7},
                    {"max_tokens", 4096},
                    {"price_per_mtok_in", 0.15},
                    {"price_per_mtok_out", 0.6}};

}  // namespace

TEST_CASE("endpoint_config: durations", "[llm]") {
  CHECK(ParseDurationMs("180s", "t") == 180000);
  CHECK(ParseDurationMs("2m", "t") == 120000);
  CHECK(ParseDurationMs("500ms", "t") == 500);
  CHECK(ParseDurationMs("1h", "t") == 3600000);
  CHECK(ParseDurationMs("1m30s", "t") == 90000);
  CHECK(ParseDurationMs("0.3s", "t") == 300);
  CHECK(ParseDurationMs("30", "t") == 30000);
  CHECK(ParseDurationMs(45, "t") == 45000);
  CHECK(ParseDurationMs(0.25, "t") == 250);
  CHECK_THAT(ConfigErrorOf([] { ParseDurationMs("5 parsecs", "llm.x.timeout"); }),
             Catch::Contains("llm.x.timeout") && Catch::Contains("unknown unit 'parsecs'"));
  CHECK_THAT(ConfigErrorOf([] { ParseDurationMs("0s", "llm.x.timeout"); }), Catch::Contains("at least 1ms"));
  CHECK_THAT(ConfigErrorOf([] { ParseDurationMs(true, "llm.x.timeout"); }), Catch::Contains("llm.x.timeout"));
  CHECK_THAT(ConfigErrorOf([] { ParseDurationMs("", "llm.x.timeout"); }), Catch::Contains("invalid duration"));
}

TEST_CASE("endpoint_config: parse a full endpoint", "[llm]") {
  EndpointConfig config = ParseEndpoint("default", kSpec, MapEnv({{"MY_KEY", "sk-test-0001"}}));
  CHECK(config.name == "default");
  CHECK(config.base_url == "http://127.0.0.1:8000/v1");  // trailing slash stripped
  CHECK(config.ChatCompletionsUrl() == "http://127.0.0.1:8000/v1/chat/completions");
  CHECK(config.model == "gpt-oss-120b");
  CHECK(config.api_key == "sk-test-0001");
  CHECK(config.api_key_source == "MY_KEY");
  CHECK(config.max_concurrency == 3);
  CHECK(config.timeout_ms == 120000);
  CHECK(config.max_retries == 4);
  CHECK(config.temperature == 0.7);
  CHECK(config.max_tokens == 4096);
  CHECK(config.price_per_mtok_in == 0.15);
  CHECK(config.price_per_mtok_out == 0.6);
  const std::string redacted = config.ToRedactedJson().dump();
  CHECK(redacted.find("sk-test-0001") == std::string::npos);
  CHECK(config.ToRedactedJson()["api_key_set"] == true);

  EndpointConfig minimal = ParseEndpoint("m", {{"base_url", "https://api.example.com/v1"}, {"model", "x"}}, MapEnv({}));
  CHECK(minimal.max_concurrency == 4);
  CHECK(minimal.timeout_ms == 180000);
  CHECK(minimal.max_retries == 2);
  CHECK(minimal.deadline_ms == 0);  // no whole-request bound unless configured
  CHECK_FALSE(minimal.temperature.has_value());

  json bounded = kSpec;
  bounded["deadline"] = "10m";
  EndpointConfig with_deadline = ParseEndpoint("default", bounded, MapEnv({}));
  CHECK(with_deadline.deadline_ms == 600000);
  CHECK(with_deadline.ToRedactedJson()["deadline_ms"] == 600000);
  CHECK(minimal.api_key.empty());
}

TEST_CASE("endpoint_config: validation errors name the field", "[llm]") {
  auto with = [](const std::string& key, json value) {
    json spec = kSpec;
    spec[key] = std::move(value);
    return spec;
  };
  auto env = MapEnv({});
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with("max_concurrency", 0), env); }),
             Catch::Contains("llm.default.max_concurrency") && Catch::Contains("out of range"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with("max_retries", "three"), env); }),
             Catch::Contains("llm.default.max_retries: expected an integer"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with("timeout", "soon"), env); }),
             Catch::Contains("llm.default.timeout"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with("deadline", 0), env); }),
             Catch::Contains("llm.default.deadline"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with("dedline", "5m"), env); }),
             Catch::Contains("did you mean 'deadline'"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with("temperature", -1), env); }),
             Catch::Contains("llm.default.temperature"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with("base_url", "ftp://x"), env); }),
             Catch::Contains("llm.default.base_url") && Catch::Contains("http://"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with("max_concurency", 2), env); }),
             Catch::Contains("llm.default.max_concurency: unknown field") &&
                 Catch::Contains("did you mean 'max_concurrency'"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with("extra", {{"model", "y"}}), env); }),
             Catch::Contains("llm.default.extra.model"));
  // No base_url anywhere: the OpenAI SDKs' default (docs/llm.md, "Environment overrides").
  CHECK(ParseEndpoint("default", {{"model", "m"}}, env).base_url == "https://api.openai.com/v1");
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", {{"model", "m"}}, MapEnv({{"OPENAI_BASE_URL", "localhost:8000"}})); }),
             Catch::Contains("llm.default.base_url") && Catch::Contains("(from OPENAI_BASE_URL)"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", {{"base_url", "http://h"}}, env); }),
             Catch::Contains("llm.default.model: required"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", json::array(), env); }), Catch::Contains("llm.default"));
  // An unset api_key_env is reported only when a live client needs the key.
  EndpointConfig no_key = ParseEndpoint("default", kSpec, env);
  CHECK_THAT(ConfigErrorOf([&] { RequireApiKey(no_key); }),
             Catch::Contains("llm.default.api_key_env") && Catch::Contains("MY_KEY"));
}

TEST_CASE("endpoint_config: environment overrides", "[llm]") {
  SECTION("global overrides replace base_url, model and key") {
    auto config = ParseEndpoint("default", kSpec,
                                MapEnv({{"ACCELOPT_LLM_BASE_URL", "http://10.0.0.2:9000/v1"},
                                        {"ACCELOPT_LLM_MODEL", "qwen"},
                                        {"ACCELOPT_LLM_API_KEY", "sk-override"},
                                        {"MY_KEY", "sk-configured"}}));
    CHECK(config.base_url == "http://10.0.0.2:9000/v1");
    CHECK(config.model == "qwen");
    CHECK(config.api_key == "sk-override");
    CHECK(config.api_key_source == "ACCELOPT_LLM_API_KEY");
  }
  SECTION("per-endpoint overrides win over global ones") {
    auto config = ParseEndpoint("fast-small", kSpec,
                                MapEnv({{"ACCELOPT_LLM_MODEL", "global"}, {"ACCELOPT_LLM_FAST_SMALL_MODEL", "mine"}}));
    CHECK(config.model == "mine");
  }
  SECTION("overrides can supply fields the block lacks") {
    auto config = ParseEndpoint("default", json::object(),
                                MapEnv({{"ACCELOPT_LLM_BASE_URL", "http://h/v1"}, {"ACCELOPT_LLM_MODEL", "m"}}));
    CHECK(config.base_url == "http://h/v1");
    CHECK(config.model == "m");
  }
  SECTION("surrounding whitespace is trimmed from keys") {
    CHECK(ParseEndpoint("default", kSpec, MapEnv({{"MY_KEY", " sk-file-key\n"}})).api_key == "sk-file-key");
  }
  SECTION("OPENAI_API_KEY is the fallback only without api_key_env") {
    json spec = kSpec;
    spec.erase("api_key_env");
    CHECK(ParseEndpoint("default", spec, MapEnv({{"OPENAI_API_KEY", "sk-openai"}})).api_key == "sk-openai");
    CHECK(ParseEndpoint("default", kSpec, MapEnv({{"OPENAI_API_KEY", "sk-openai"}})).api_key.empty());
  }
}

TEST_CASE("endpoint_config: RedactSecret", "[llm]") {
  CHECK(RedactSecret("key sk-abcdef and sk-abcdef", "sk-abcdef") == "key [REDACTED] and [REDACTED]");
  CHECK(RedactSecret("abc", "") == "abc");
  CHECK(RedactSecret("a b c", "b") == "a b c");  // too short to be a secret
}
