// pipelines/flashinfer-mcgs.yaml and flashinfer-agent.yaml end to end: the graph
// search's and the agent's stages (plugins/search) on a FlashInfer-Bench
// definition, with the FIB planner, executor, evaluator and scorer, against a
// scripted local OpenAI-compatible server (python solutions on CPU).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "host/flashinfer/fib_optimize_fixture.h"
#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using namespace accelopt::testing::fib_optimize;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Runs `pipeline` on the fixture's rmsnorm_h16 with kSlow as its start, against `server`,
// with `sets` and the settings that keep a CPU timing short (one workload, 2 trials of 10
// timed calls); the run directory is `dir`/run.
CommandResult RunOnSlowRmsnorm(const std::string& pipeline, const std::vector<std::string>& sets, const fs::path& dir,
                           const ScriptedLlmServer& server) {
  const fs::path root = TraceSetWithSlowSolution(dir);
  std::vector<std::string> args = {"run", SourcePath(pipeline).string(), "--run-dir", (dir / "run").string(),
                                   "--set", "vars.trace_set=" + root.string(), "--set", "vars.definitions=[rmsnorm_h16]",
                                   "--set", "vars.authors=[tests]", "--set", "vars.trials=2", "--set", "vars.warmup=2",
                                   "--set", "vars.iterations_timed=10", "--set", "vars.cold_cache=false",
                                   "--set", "llm.default.base_url=" + server.BaseUrl(), "--set", "llm.default.model=fake-model"};
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  return RunHost(args);
}

std::vector<json> JsonLines(const fs::path& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

// The run's report: one definition, whose best is kFast at more than 1.5x, beyond the noise.
void CheckTheRewriteWon(const fs::path& run) {
  json report = ReadJson(run / "optimize_results.json");
  REQUIRE(report["cases"].size() == 1);
  CHECK(report["cases"][0]["speedup"].get<double>() > 1.5);
  CHECK(report["cases"][0]["noise"] == "faster");
  CHECK(ReadJson(report["cases"][0]["file"].get<std::string>())["sources"][0]["content"] == kFast);
}

}  // namespace

TEST_CASE("flashinfer-mcgs: the graph search finds the scripted rewrite and merges its repeats", "[flashinfer][search][e2e]") {
  if (!HaveTorch()) {
    WARN("skipped: no python3-torch for /usr/bin/python3.11");
    return;
  }
  TempDir dir;
  ScriptedLlmServer server(VectorizingModel);
  auto result = RunOnSlowRmsnorm("pipelines/flashinfer-mcgs.yaml", {"vars.budget=3", "vars.workers=1", "vars.moves=2"}, dir.path(), server);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const fs::path run = dir.path() / "run";
  CheckTheRewriteWon(run);
  // The search's own files: the incumbent moved off the root, and the executor's second
  // answer with the same solution is the same state (a transposition or a self-loop), not a
  // second evaluation.
  json graph = ReadJson(run / "search_graph.json");
  const json& cg = graph["cases"]["rmsnorm_h16"];
  CHECK(cg["incumbent"] != "n0");
  CHECK(cg["evaluations"].get<int>() == 1);
  int merged = 0, evaluated = 0;
  for (const auto& e : JsonLines(run / "events.jsonl")) {
    merged += e["type"] == "transposition" || (e["type"] == "invalid" && e.value("reason", "").find("unchanged") == 0);
    evaluated += e["type"] == "evaluate";
  }
  CHECK(merged >= 1);
  CHECK(evaluated == 1);
  // Its lesson reached the memory.
  CHECK(ReadJson(run / "memory.json")["items"].size() >= 1);
}

TEST_CASE("flashinfer-agent: the agent keeps the scripted rewrite and its lessons", "[flashinfer][search][e2e]") {
  if (!HaveTorch()) {
    WARN("skipped: no python3-torch for /usr/bin/python3.11");
    return;
  }
  TempDir dir;
  ScriptedLlmServer server(VectorizingModel);
  const fs::path run = dir.path() / "run";
  auto result = RunOnSlowRmsnorm("pipelines/flashinfer-agent.yaml", {"vars.rounds=2", "vars.plans=1"}, dir.path(), server);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CheckTheRewriteWon(run);
  const auto experiments = JsonLines(run / "experiments.jsonl");
  REQUIRE(experiments.size() == 2);
  CHECK(experiments[0]["status"] == "improved");
  // Round 2 starts from the rewrite: the same code again is the current kernel, not a
  // candidate (fib_execute: same canonical form), so it is not timed again.
  CHECK(experiments[1]["status"] == "compile_fail");
  CHECK(experiments[1]["error"].get<std::string>().rfind("unchanged", 0) == 0);
  json lessons = ReadJson(run / "lessons.json");
  CHECK(lessons["cases"]["rmsnorm_h16"].size() == 2);
  // The second executor call read the lessons of the first round (the reflexion block).
  int executor_calls = 0;
  std::string last_executor;
  for (const auto& body : server.Requests())
    if (Role(body) == "executor") {
      ++executor_calls;
      last_executor = body["messages"][1]["content"];
    }
  CHECK(executor_calls == 2);
  CHECK(last_executor.find("improved") != std::string::npos);
}
