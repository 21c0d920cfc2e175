// pipelines/nkibench-agent.yaml with a scripted server (docs/search.md, "Reflexion"):
// round 1's kernel fails to compile, the model is asked for the lesson (the reflect
// call), and its reply is stored in lessons.json with source "model" and reaches the
// next executor prompt; when the reflect reply is empty, the template lesson is stored
// instead. The reflect call is counted in the run's LLM usage.
#include <catch2/catch.hpp>

#include <mutex>

#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

namespace {

constexpr const char* kModelLesson =
    "Indexing rows with nl.arange while slicing columns mixes basic and advanced indexing, which does not compile. "
    "Slice both axes instead.";

struct Run {
  json lessons;
  std::vector<std::string> executor_prompts;
  int reflect_calls = 0;
  size_t requests = 0;
  json report;
};

Run RunAgent(const std::string& reflect_reply) {
  std::mutex mutex;
  Run run;
  ScriptedLlmServer server([&](const json& body) -> std::string {
    const std::string system = body["messages"][0]["content"];
    const std::string user = body["messages"][1]["content"];
    std::lock_guard<std::mutex> lock(mutex);
    if (system.rfind("You review one attempt", 0) == 0) {
      ++run.reflect_calls;
      return reflect_reply;
    }
    if (system.rfind("You are a performance engineer", 0) == 0) return "PLAN: fuse the silu\nOne ScalarE instruction per tile.";
    if (system.rfind("You are an NKI kernel engineer", 0) == 0) {
      run.executor_prompts.push_back(user);
      return Fenced(run.executor_prompts.size() == 1 ? kBrokenSilu : kFusedSilu);
    }
    return "TITLE: fused silu\nDESCRIPTION:\nOne activation.\n";
  });
  TempDir dir;
  const auto run_dir = dir.path() / "run";
  std::vector<std::string> args = {"run", SourcePath("pipelines/nkibench-agent.yaml").string(), "--run-dir", run_dir.string()};
  for (const std::string& s : std::vector<std::string>{"vars.cases=small", "vars.problems=[silu]", "backend.nki=emulator", "vars.mode=llm",
                              "vars.budget=2", "vars.plans=1", "vars.isolation=inprocess", "vars.llm_concurrency=1",
                              "llm.default.model=fake-model", "llm.default.base_url=" + server.BaseUrl()}) {
    args.push_back("--set");
    args.push_back(s);
  }
  auto result = RunHost(args);
  INFO(result.output);
  REQUIRE(ReadJson(run_dir / "run.json")["status"] == "succeeded");
  run.lessons = ReadJson(run_dir / "lessons.json")["cases"]["silu_M256_N1024"];
  run.report = ReadJson(run_dir / "optimize_results.json");
  run.requests = server.Requests().size();
  return run;
}

}  // namespace

TEST_CASE("agent loop, LLM mode: the model writes the lesson of a failed attempt; it is stored and shown next round",
          "[search][agent][e2e][llm][reflect]") {
  Run run = RunAgent(std::string("Lesson: ") + kModelLesson);
  REQUIRE(run.reflect_calls == 1);  // only the failed round is reflected on
  REQUIRE(run.lessons.size() == 2);
  CHECK(run.lessons[0]["category"] == "error");
  CHECK(run.lessons[0]["lesson"] == kModelLesson);
  CHECK(run.lessons[0]["source"] == "model");
  CHECK(run.lessons[1]["category"] == "improved");
  CHECK(run.lessons[1]["source"] == "template");
  REQUIRE(run.executor_prompts.size() == 2);
  CHECK_THAT(run.executor_prompts[1], Catch::Contains(kModelLesson));
  // plan + executor per round, one summary and the reflect call: every request is in the run's usage.
  CHECK(run.requests == 6);
  CHECK(run.report["llm"]["requests"].get<size_t>() == run.requests);
}

TEST_CASE("agent loop, LLM mode: an empty reflect reply leaves the template lesson", "[search][agent][e2e][llm][reflect]") {
  Run run = RunAgent("");
  REQUIRE(run.reflect_calls == 1);
  REQUIRE(run.lessons.size() == 2);
  CHECK(run.lessons[0]["lesson"] == "failed to compile or run (compile_error)");
  CHECK(run.lessons[0]["source"] == "template");
  REQUIRE(run.executor_prompts.size() == 2);
  CHECK_THAT(run.executor_prompts[1], Catch::Contains("failed to compile or run (compile_error)"));
}
