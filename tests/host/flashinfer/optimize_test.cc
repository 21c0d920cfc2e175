// pipelines/flashinfer-optimize.yaml end to end: against a scripted local
// OpenAI-compatible server it produces a python solution that passes and is
// faster; without an LLM it says so and exits 2.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "host/flashinfer/fib_optimize_fixture.h"
#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;
namespace fs = std::filesystem;

using namespace accelopt::testing::fib_optimize;

TEST_CASE("flashinfer-optimize: without an LLM it says so and exits 2", "[flashinfer][e2e]") {
  TempDir dir;
  auto result = RunHost({"run", SourcePath("pipelines/flashinfer-optimize.yaml").string(), "--run-dir",
                         (dir.path() / "run").string()});
  INFO(result.output);
  CHECK(result.exit_code == 2);
  CHECK(result.output.find("flashinfer-optimize needs an LLM") != std::string::npos);
}

TEST_CASE("flashinfer-optimize: a scripted LLM's python rewrite passes and is faster", "[flashinfer][e2e]") {
  if (!HaveTorch()) {
    WARN(std::string("skipped: ") + "no python3-torch for /usr/bin/python3.11");
    return;
  }
  TempDir dir;
  const fs::path root = TraceSetWithSlowSolution(dir.path());
  ScriptedLlmServer server(VectorizingModel);
  fs::path run = dir.path() / "run";
  auto result = RunHost({"run", SourcePath("pipelines/flashinfer-optimize.yaml").string(), "--run-dir", run.string(),
                         "--set", "vars.trace_set=" + root.string(), "--set", "vars.definitions=[rmsnorm_h16]",
                         "--set", "vars.authors=[tests]", "--set", "vars.iterations=1", "--set", "vars.plans=1",
                         "--set", "vars.samples=1", "--set", "vars.trials=2", "--set", "vars.warmup=2", "--set",
                         "vars.iterations_timed=10", "--set", "vars.cold_cache=false", "--set",
                         "llm.default.base_url=" + server.BaseUrl(), "--set", "llm.default.model=fake-model"});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  json report = ReadJson(run / "optimize_results.json");
  REQUIRE(report["cases"].size() == 1);
  const json& c = report["cases"][0];
  CHECK(c["definition"] == "rmsnorm_h16");
  CHECK(c["speedup"].get<double>() > 1.5);
  json best = ReadJson(c["file"].get<std::string>());
  CHECK(best["author"] == "AccelOpt");
  CHECK(best["sources"][0]["content"].get<std::string>() == kFast);
  // Its traces passed, in FIB's layout under the AccelOpt author.
  std::ifstream traces(run / "traces/AccelOpt/rmsnorm/rmsnorm_h16.jsonl");
  std::string line;
  int passed = 0;
  while (std::getline(traces, line)) passed += json::parse(line)["evaluation"]["status"] == "PASSED";
  CHECK(passed >= 1);
  json memory = ReadJson(run / "memory.json");
  REQUIRE(memory["items"].size() == 1);
  CHECK(memory["items"][0]["title"] == "Vectorize the column loop");
  // The planner saw the definition, the code and its latency.
  bool saw = false;
  for (const auto& body : server.Requests())
    if (Role(body) == "planner") {
      std::string user = body["messages"][1]["content"];
      saw = user.find("Name: rmsnorm_h16") != std::string::npos && user.find("for j in range") != std::string::npos &&
            user.find("latency: ") != std::string::npos;
    }
  CHECK(saw);
}
