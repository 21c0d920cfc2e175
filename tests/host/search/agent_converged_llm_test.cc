// pipelines/nkibench-agent.yaml against a scripted server that behaves like a
// converging model (issue 37): it answers the first executor call in prose, then
// always with the same fused silu kernel. The prose gets one re-ask quoting the
// parse error; once the fused kernel is the current one, its repeat gets one
// re-ask naming the repeat and then the problem is finished ("converged")
// instead of asking again round after round.
#include <catch2/catch.hpp>

#include <atomic>
#include <fstream>
#include <mutex>

#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

TEST_CASE("agent loop with a converging LLM: prose and repeats get one re-ask each, then the problem is finished",
          "[search][agent][e2e][llm][reask]") {
  std::mutex mutex;
  std::vector<std::string> executor_prompts;
  std::atomic<int> requests{0};
  ScriptedLlmServer server([&](const json& body) -> std::string {
    ++requests;
    const std::string system = body["messages"][0]["content"];
    const std::string user = body["messages"][1]["content"];
    if (system.rfind("You are a performance engineer", 0) == 0) return "PLAN: fuse the silu\nOne ScalarE instruction per tile.";
    if (system.rfind("You are an NKI kernel engineer", 0) == 0) {
      size_t call;
      {
        std::lock_guard<std::mutex> lock(mutex);
        executor_prompts.push_back(user);
        call = executor_prompts.size();
      }
      if (call == 1) return "I would fuse the activation into one instruction per tile; that should help a lot.";
      return Fenced(kFusedSilu);
    }
    return "TITLE: fused silu\nDESCRIPTION:\nOne activation.\n";
  });
  TempDir dir;
  const auto run_dir = dir.path() / "run";
  std::vector<std::string> args = {"run", SourcePath("pipelines/nkibench-agent.yaml").string(), "--run-dir", run_dir.string()};
  for (const std::string& s : std::vector<std::string>{"vars.cases=small", "vars.problems=[silu]", "backend.nki=emulator", "vars.mode=llm",
                              "vars.budget=6", "vars.plans=1", "vars.isolation=inprocess", "vars.llm_concurrency=1",
                              "llm.default.model=fake-model", "llm.default.base_url=" + server.BaseUrl()}) {
    args.push_back("--set");
    args.push_back(s);
  }
  auto result = RunHost(args);
  INFO(result.output);
  REQUIRE(ReadJson(run_dir / "run.json")["status"] == "succeeded");

  std::vector<json> experiments;
  {
    std::ifstream in(run_dir / "experiments.jsonl");
    for (std::string line; std::getline(in, line);) experiments.push_back(json::parse(line));
  }
  // Round 1: prose, a re-ask, the fused kernel (improved). Round 2: a repeat, a re-ask, a repeat: finished.
  REQUIRE(experiments.size() == 2);
  CHECK(experiments[0]["status"] == "improved");
  CHECK(experiments[1]["status"] == "compile_fail");
  CHECK_THAT(experiments[1]["error"].get<std::string>(), Catch::Contains("unchanged"));

  std::vector<std::string> prompts;
  {
    std::lock_guard<std::mutex> lock(mutex);
    prompts = executor_prompts;
  }
  REQUIRE(prompts.size() == 4);
  CHECK_THAT(prompts[1], Catch::Contains("could not be used") && Catch::Contains("no fenced code block"));
  CHECK_THAT(prompts[3], Catch::Contains("is a repeat") && Catch::Contains("different idea"));
  CHECK(prompts[2].find("is a repeat") == std::string::npos);
  // A small constant per evaluated candidate (one here): plan, two executor calls and a summary per round.
  CHECK(requests.load() <= 10);
  CHECK(ReadJson(run_dir / "optimize_results.json")["rows"][0]["status"] == "improved");
}
