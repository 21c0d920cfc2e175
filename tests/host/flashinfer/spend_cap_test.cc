// LLM spend caps (docs/llm.md, "Spend caps") in AccelOpt's FlashInfer-Bench loop
// (pipelines/flashinfer-optimize.yaml) against a scripted server: a per-definition cap of
// 2 requests (one plan, one sample) ends the definition's search after the first
// iteration - it leaves the beam, the summarizer is not asked, the server sees 2
// requests - and the report names the cap.
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

TEST_CASE("flashinfer-optimize: a per-definition spend cap ends the definition's search and is reported",
          "[flashinfer][e2e][llm][spend]") {
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
                         "--set", "vars.authors=[tests]", "--set", "vars.iterations=4", "--set", "vars.plans=1",
                         "--set", "vars.samples=1", "--set", "vars.trials=2", "--set", "vars.warmup=2", "--set",
                         "vars.iterations_timed=10", "--set", "vars.cold_cache=false", "--set",
                         "llm.default.base_url=" + server.BaseUrl(), "--set", "llm.default.model=fake-model", "--set",
                         "llm.default.caps.problem.requests=2"});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const std::string reason = "spend cap: 2 requests per problem reached (2 spent)";
  // One plan and one sample; no summary, no second iteration.
  auto requests = server.Requests();
  CHECK(requests.size() == 2);
  for (const auto& body : requests) CHECK(Role(body) != "summarizer");
  const json report = ReadJson(run / "optimize_results.json");
  REQUIRE(report["cases"].size() == 1);
  CHECK(report["cases"][0]["speedup"].get<double>() > 1.5);  // the one candidate it could afford
  CHECK(report["cases"][0]["stopped"] == reason);
  CHECK(report["spend"]["caps"]["problem"]["requests"] == 2);
  CHECK(report["spend"]["run"]["requests"] == 2);
  CHECK(report["spend"]["run"]["refused"] == 0);  // the stages stopped asking: nothing had to be refused
  CHECK_THAT(ReadFile(run / "optimize_results.md"), Catch::Contains("rmsnorm_h16: search stopped: " + reason));
  CHECK(ReadJson(run / "run.json")["status"] == "succeeded");
}
