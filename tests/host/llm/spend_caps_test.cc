// The LLM spend caps (docs/llm.md, "Spend caps"): `llm.<endpoint>.caps` parsing and
// validation, the thread-safe SpendAccount, the SpendCapChatClient decorator and the
// registry's accounts (per endpoint, seeded from the transcript on resume).
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "llm/client_registry.h"
#include "llm/endpoint_config.h"
#include "llm/llm_error.h"
#include "llm/scripted_chat_client.h"
#include "llm/spend_caps.h"
#include "host/llm/llm_test_env.h"

using namespace accelopt::llm;
using nlohmann::json;
using accelopt::llm::testing::NoEnv;
using accelopt::llm::testing::ConfigErrorOf;
namespace fs = std::filesystem;

namespace {

// The LlmError{llm_spend_cap} message of `fn`, "" when it does not throw one.
std::string SpendCapErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const LlmError& error) {
    CHECK(error.kind == ErrorKind::kSpendCap);
    CHECK(std::string(error.kind_name()) == "llm_spend_cap");
    return error.message;
  }
  return "";
}

ChatRequest Ask(const std::string& problem, const std::string& text = "hi") {
  ChatRequest request;
  request.endpoint = "default";
  request.stage = "plan";
  request.problem = problem;
  request.messages = json::array({{{"role", "user"}, {"content", text}}});
  return request;
}

struct TempDir {
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("accelopt-spend-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

SpendCaps Caps(CapLimits problem, CapLimits run) { return SpendCaps{problem, run}; }

}  // namespace

TEST_CASE("spend caps: defaults, overrides, nulls and zeros", "[llm][spend]") {
  const SpendCaps defaults;
  CHECK(defaults.problem.requests == 500);
  CHECK(defaults.problem.tokens == 10000000);
  CHECK(defaults.problem.usd == 10.0);
  CHECK(defaults.run.requests == 5000);
  CHECK(defaults.run.tokens == 100000000);
  CHECK(defaults.run.usd == 100.0);

  // An endpoint without `caps` gets the defaults.
  const json spec = {{"base_url", "http://h/v1"}, {"model", "m"}};
  EndpointConfig plain = ParseEndpoint("default", spec, NoEnv());
  CHECK(plain.caps.problem.requests == 500);
  CHECK(plain.caps.run.usd == 100.0);
  CHECK(plain.ToRedactedJson()["caps"] ==
        json({{"problem", {{"requests", 500}, {"tokens", 10000000}, {"usd", 10.0}}},
              {"run", {{"requests", 5000}, {"tokens", 100000000}, {"usd", 100.0}}}}));

  // A key left out keeps its default; 0 and null mean no cap; YAML's 4e6 is an integer.
  json with_caps = spec;
  with_caps["caps"] = {{"problem", {{"requests", 3}, {"tokens", 4e6}, {"usd", nullptr}}}, {"run", {{"usd", 10}, {"tokens", 0}}}};
  EndpointConfig capped = ParseEndpoint("default", with_caps, NoEnv());
  CHECK(capped.caps.problem.requests == 3);
  CHECK(capped.caps.problem.tokens == 4000000);
  CHECK(capped.caps.problem.usd == 0.0);
  CHECK(capped.caps.run.requests == 5000);
  CHECK(capped.caps.run.tokens == 0);
  CHECK(capped.caps.run.usd == 10.0);
  CHECK(capped.ToRedactedJson()["caps"]["problem"]["usd"].is_null());
  CHECK(capped.ToRedactedJson()["caps"]["run"]["tokens"].is_null());

  // null for a scope or for caps itself: no cap there.
  CHECK(ParseSpendCaps(json{{"problem", nullptr}}, "llm.default.caps").problem.requests == 0);
  CHECK(ParseSpendCaps(json{{"problem", nullptr}}, "llm.default.caps").run.requests == 5000);
  const SpendCaps none = ParseSpendCaps(nullptr, "llm.default.caps");
  CHECK((none.problem.requests == 0 && none.problem.tokens == 0 && none.problem.usd == 0.0));
  CHECK((none.run.requests == 0 && none.run.tokens == 0 && none.run.usd == 0.0));
}

TEST_CASE("spend caps: strict validation names the field", "[llm][spend]") {
  auto with = [](json caps) {
    return json{{"base_url", "http://h/v1"}, {"model", "m"}, {"caps", std::move(caps)}};
  };
  auto env = NoEnv();
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with({{"run", {{"usd", -1}}}}), env); }),
             Catch::Contains("llm.default.caps.run.usd") && Catch::Contains("non-negative"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with({{"run", {{"usd", "ten"}}}}), env); }),
             Catch::Contains("llm.default.caps.run.usd"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with({{"problem", {{"requests", 2.5}}}}), env); }),
             Catch::Contains("llm.default.caps.problem.requests: expected a non-negative integer"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with({{"problem", {{"requests", -3}}}}), env); }),
             Catch::Contains("llm.default.caps.problem.requests") && Catch::Contains("out of range"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with({{"problem", {{"tokens", true}}}}), env); }),
             Catch::Contains("llm.default.caps.problem.tokens"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with({{"problem", {{"request", 3}}}}), env); }),
             Catch::Contains("llm.default.caps.problem.request: unknown field") &&
                 Catch::Contains("did you mean 'requests'"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with({{"runs", {{"usd", 3}}}}), env); }),
             Catch::Contains("llm.default.caps.runs: unknown field") && Catch::Contains("did you mean 'run'"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with({{"run", 5}}), env); }),
             Catch::Contains("llm.default.caps.run: expected an object"));
  CHECK_THAT(ConfigErrorOf([&] { ParseEndpoint("default", with("lots"), env); }),
             Catch::Contains("llm.default.caps: expected an object"));
  CHECK_THAT(ConfigErrorOf([&] {
               ParseEndpoint("default", {{"base_url", "http://h/v1"}, {"model", "m"}, {"cap", json::object()}}, env);
             }),
             Catch::Contains("llm.default.cap: unknown field") && Catch::Contains("did you mean 'caps'"));
}

TEST_CASE("spend account: a per-problem request cap refuses the next request, naming cap, value and spend", "[llm][spend]") {
  SpendAccount account("default", Caps({3, 0, 0}, {0, 0, 0}));
  for (int i = 0; i < 3; ++i) CHECK(SpendCapErrorOf([&] { account.Admit("silu"); }).empty());
  CHECK(account.Stopped("silu") == std::optional<std::string>("spend cap: 3 requests per problem reached (3 spent)"));
  CHECK_FALSE(account.Stopped("matmul"));
  const std::string message = SpendCapErrorOf([&] { account.Admit("silu"); });
  CHECK_THAT(message, Catch::Contains("spend cap: 3 requests per problem reached (3 spent)") &&
                          Catch::Contains("problem 'silu'") && Catch::Contains("not sent") &&
                          Catch::Contains("llm.default.caps.problem.requests"));
  // Other problems and requests without a problem go on.
  CHECK(SpendCapErrorOf([&] { account.Admit("matmul"); }).empty());
  CHECK(SpendCapErrorOf([&] { account.Admit(""); }).empty());
  CHECK(account.ProblemSpend("silu").requests == 3);
  CHECK(account.ProblemSpend("silu").refused == 1);
  CHECK(account.RunSpend().requests == 5);
  CHECK(account.RunSpend().refused == 1);

  const json status = account.Status({"silu", "matmul", "never_seen"});
  CHECK(status["endpoint"] == "default");
  CHECK(status["caps"]["problem"]["requests"] == 3);
  CHECK(status["caps"]["run"]["requests"].is_null());
  CHECK(status["problems"]["silu"]["stopped"] == "spend cap: 3 requests per problem reached (3 spent)");
  CHECK(status["problems"]["silu"]["refused"] == 1);
  CHECK(status["problems"]["matmul"]["stopped"].is_null());
  CHECK(status["problems"]["never_seen"]["requests"] == 0);
  CHECK(status["run"]["stopped"].is_null());
  CHECK(account.Status()["problems"].size() == 2);  // every problem seen
}

TEST_CASE("spend account: token and USD caps count what finished requests used", "[llm][spend]") {
  SpendAccount tokens("default", Caps({0, 1000, 0}, {0, 0, 0}));
  tokens.Admit("silu");
  tokens.Settle("silu", 600, 300, 0.0);
  CHECK_FALSE(tokens.Stopped("silu"));
  tokens.Admit("silu");
  tokens.Settle("silu", 80, 20, 0.0);
  CHECK(tokens.Stopped("silu") == std::optional<std::string>("spend cap: 1000 tokens per problem reached (1000 spent)"));
  CHECK_THAT(SpendCapErrorOf([&] { tokens.Admit("silu"); }), Catch::Contains("llm.default.caps.problem.tokens"));

  SpendAccount usd("cheap", Caps({0, 0, 0}, {0, 0, 0.5}));
  usd.Admit("a");
  usd.Settle("a", 0, 0, 0.3);
  usd.Admit("b");
  usd.Settle("b", 0, 0, 0.25);
  // The run's cap stops every problem, also one that never asked.
  CHECK(usd.Stopped("c") == std::optional<std::string>("spend cap: 0.5 USD per run reached (0.55 USD spent)"));
  const std::string message = SpendCapErrorOf([&] { usd.Admit("c"); });
  CHECK_THAT(message, Catch::Contains("0.5 USD per run reached") && Catch::Contains("llm.cheap.caps.run.usd"));
  CHECK(usd.Status({"c"})["problems"]["c"]["stopped"] == "spend cap: 0.5 USD per run reached (0.55 USD spent)");
  CHECK(usd.Status()["run"]["stopped"] == "spend cap: 0.5 USD per run reached (0.55 USD spent)");

  // Release takes back a request that was not sent after all.
  SpendAccount released("default", Caps({1, 0, 0}, {0, 0, 0}));
  released.Admit("x");
  released.Release("x");
  CHECK(SpendCapErrorOf([&] { released.Admit("x"); }).empty());
}

TEST_CASE("spend account: the request cap holds under concurrency", "[llm][spend]") {
  SpendAccount account("default", Caps({25, 0, 0}, {40, 0, 0}));
  std::atomic<int> admitted{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        try {
          account.Admit(t % 2 ? "odd" : "even");
          ++admitted;
          account.Settle(t % 2 ? "odd" : "even", 1, 1, 0.0);
        } catch (const LlmError&) {
          ++refused;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(admitted.load() == 40);  // the run's cap: 2 x 25 per problem would be 50
  CHECK(refused.load() == 160 - 40);
  CHECK(account.ProblemSpend("odd").requests + account.ProblemSpend("even").requests == 40);
  CHECK(account.ProblemSpend("odd").requests <= 25);
  CHECK(account.ProblemSpend("even").requests <= 25);
  CHECK(account.RunSpend().tokens() == 80);
}

TEST_CASE("spend account: the progress text shows spend against the run's caps", "[llm][spend]") {
  SpendAccount account("default", Caps({2, 0, 0}, {2000, 40000000, 50}));
  account.Admit("silu");
  account.Settle("silu", 12000, 2400, 0.0123);
  CHECK(account.ProgressText() == "1/2000 req · 14.4k/40M tok · $0.0123/$50");
  account.Admit("silu");
  CHECK(account.ProgressText() == "2/2000 req · 14.4k/40M tok · $0.0123/$50 · 1 problem at a cap");
  SpendAccount uncapped("default", Caps({0, 0, 0}, {0, 0, 0}));
  uncapped.Admit("");
  CHECK(uncapped.ProgressText() == "1 req · 0 tok · $0");
  CHECK(CompactCount(950) == "950");
  CHECK(CompactCount(4000000) == "4M");
}

TEST_CASE("spend cap client: a refused request never reaches the server; replies are settled at the endpoint's prices",
          "[llm][spend]") {
  EndpointConfig endpoint = ParseEndpoint(
      "default",
      {{"base_url", "http://h/v1"}, {"model", "m"}, {"price_per_mtok_in", 1.0}, {"price_per_mtok_out", 2.0},
       {"caps", {{"problem", {{"requests", 2}}}}}},
      NoEnv());
  auto account = std::make_shared<SpendAccount>("default", endpoint.caps);
  auto scripted = std::make_unique<ScriptedChatClient>(endpoint);
  ScriptedChatClient* inner = scripted.get();
  inner->SetResponder([](const ChatRequest&) {
    ChatResponse response;
    response.content = "ok";
    response.prompt_tokens = 1000000;
    response.completion_tokens = 500000;
    return response;
  });
  SpendCapChatClient client(account, endpoint, std::move(scripted));
  CHECK(client.Complete(Ask("silu")).content == "ok");
  CHECK(client.Complete(Ask("silu")).content == "ok");
  CHECK_THAT(SpendCapErrorOf([&] { client.Complete(Ask("silu")); }), Catch::Contains("2 requests per problem reached"));
  CHECK(inner->Requests().size() == 2);
  CHECK(account->ProblemSpend("silu").usd == Approx(4.0));  // 2 x (1 M x $1 + 0.5 M x $2)
  CHECK(account->ProblemSpend("silu").tokens() == 3000000);
  // A batch refuses per request; the others still run.
  auto outcomes = client.CompleteMany({Ask("silu"), Ask("matmul")});
  REQUIRE(outcomes.size() == 2);
  CHECK_FALSE(outcomes[0].ok());
  CHECK(outcomes[0].error->kind == ErrorKind::kSpendCap);
  CHECK(outcomes[1].ok());
  // A replay miss (nothing sent) is not spent.
  inner->SetResponder([](const ChatRequest&) -> ChatResponse { throw LlmError(ErrorKind::kReplayMiss, 0, "none"); });
  CHECK_THROWS_AS(client.Complete(Ask("matmul")), LlmError);
  CHECK(account->ProblemSpend("matmul").requests == 1);
}

TEST_CASE("client registry: one spend account per endpoint, seeded from the transcript on resume", "[llm][spend]") {
  TempDir dir;
  const json block = {{"default", {{"base_url", "http://h/v1"}, {"model", "m"}, {"caps", {{"problem", {{"requests", 3}}}}}}},
                      {"cheap", {{"base_url", "http://h/v1"}, {"model", "small"}, {"caps", nullptr}}}};
  RegistryOptions options;
  options.env = NoEnv();
  options.run_dir = dir.path;
  std::atomic<int> served{0};
  options.live_factory = [&served](const EndpointConfig& config) {
    auto client = std::make_unique<ScriptedChatClient>(config);
    client->SetResponder([&served](const ChatRequest&) {
      ++served;
      ChatResponse response;
      response.content = "reply";
      response.prompt_tokens = 100;
      response.completion_tokens = 20;
      response.raw = {{"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", "reply"}}}, {"finish_reason", "stop"}}}},
                      {"usage", {{"prompt_tokens", 100}, {"completion_tokens", 20}}}};
      return response;
    });
    return client;
  };
  {
    ClientRegistry registry(block, options);
    REQUIRE(registry.Account("default") != nullptr);
    CHECK(registry.Account("nope") == nullptr);
    CHECK(registry.Config("default").caps.problem.requests == 3);
    CHECK(registry.Config("cheap").caps.run.usd == 0.0);
    for (int i = 0; i < 2; ++i) registry.Get("default").Complete(Ask("silu", "q" + std::to_string(i)));
    for (int i = 0; i < 5; ++i) registry.Get("cheap").Complete(Ask("silu", "c" + std::to_string(i)));  // no caps there
    CHECK(registry.SpendProgress().find("default 2/5000 req") != std::string::npos);
    const json summary = registry.SpendSummary();
    CHECK(summary["default"]["problems"]["silu"]["requests"] == 2);
    CHECK(summary["cheap"]["problems"]["silu"]["requests"] == 5);
    CHECK(registry.Describe()["endpoints"]["default"]["caps"]["problem"]["requests"] == 3);
  }
  CHECK(served.load() == 7);
  // The resumed run counts the interrupted run's requests: one more for silu on "default".
  options.resume_transcript = TranscriptPathFor(dir.path);
  ClientRegistry resumed(block, options);
  CHECK(resumed.Account("default")->ProblemSpend("silu").requests == 2);
  CHECK(resumed.Account("default")->ProblemSpend("silu").tokens() == 240);
  CHECK(resumed.Account("cheap")->RunSpend().requests == 5);
  // A request already in the transcript is answered from it (no new spend) ...
  resumed.Get("default").Complete(Ask("silu", "q0"));
  CHECK(served.load() == 7);
  // ... a new one is sent and counted, and the next is refused.
  resumed.Get("default").Complete(Ask("silu", "new"));
  CHECK(served.load() == 8);
  CHECK_THAT(SpendCapErrorOf([&] { resumed.Get("default").Complete(Ask("silu", "newer")); }),
             Catch::Contains("3 requests per problem reached (3 spent)"));
  CHECK(served.load() == 8);
}
