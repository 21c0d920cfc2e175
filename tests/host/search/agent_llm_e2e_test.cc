// pipelines/nkibench-agent.yaml with a scripted OpenAI-compatible server (the
// small silu case, emulator): a failed first attempt reaches the next round's
// executor as error feedback and an "Avoid" lesson, the fixed kernel (sent as a
// unified diff) is kept as the new best, and the attempt history and lessons say so.
#include <catch2/catch.hpp>

#include <atomic>
#include <fstream>
#include <mutex>

#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

namespace {

// What the executor saw, per call (its user prompt), for the checks below.
struct ExecutorLog {
  std::mutex mutex;
  std::vector<std::string> prompts;
};

std::vector<json> Lines(const std::filesystem::path& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("agent loop with a scripted LLM: a failure becomes error feedback and an Avoid lesson, the fix is kept",
          "[search][agent][e2e][llm]") {
  ExecutorLog log;
  std::atomic<int> plans{0};
  ScriptedLlmServer server([&](const json& body) -> std::string {
    const std::string system = body["messages"][0]["content"];
    const std::string user = body["messages"][1]["content"];
    if (system.rfind("You are a performance engineer", 0) == 0)  // a new idea each round: the pick skips tried ones
      return "PLAN: idea " + std::to_string(plans++) + " for the silu tiles\nOne ScalarE instruction per tile.";
    if (system.rfind("You are an NKI kernel engineer", 0) == 0) {
      size_t call;
      {
        std::lock_guard<std::mutex> lock(log.mutex);
        log.prompts.push_back(user);
        call = log.prompts.size();
      }
      // The first attempt fails (a full kernel that does not compile); later ones are the fix, as a
      // unified diff of the current kernel (the executor's diff format, shared with the graph search).
      if (call == 1) return Fenced(kBrokenSilu);
      return "```diff\n" + WholeFileDiff(ParentKernel(user), kFusedSilu) + "```\n";
    }
    return "TITLE: fused silu\nDESCRIPTION:\nOne activation.\n";
  });
  TempDir dir;
  const auto run_dir = dir.path() / "run";
  std::vector<std::string> args = {"run", SourcePath("pipelines/nkibench-agent.yaml").string(), "--run-dir", run_dir.string()};
  for (const std::string& s : std::vector<std::string>{"vars.cases=small", "vars.problems=[silu]", "backend.nki=emulator", "vars.mode=llm",
                              "vars.budget=3", "vars.plans=1", "vars.isolation=inprocess", "vars.llm_concurrency=1",
                              "llm.default.model=fake-model", "llm.default.base_url=" + server.BaseUrl()}) {
    args.push_back("--set");
    args.push_back(s);
  }
  auto result = RunHost(args);
  INFO(result.output);
  REQUIRE(ReadJson(run_dir / "run.json")["status"] == "succeeded");

  const auto experiments = Lines(run_dir / "experiments.jsonl");
  REQUIRE(experiments.size() >= 2);
  const std::string first = experiments[0]["status"];
  CHECK((first == "compile_fail" || first == "correctness_fail"));
  CHECK_FALSE(experiments[0]["error"].get<std::string>().empty());
  CHECK(experiments[1]["status"] == "improved");
  CHECK(experiments[1]["speedup_vs_best"].get<double>() > 1.05);  // against the baseline, the best before the round

  // The second executor call carried the first attempt's error and the lesson drawn from it.
  std::vector<std::string> prompts;
  {
    std::lock_guard<std::mutex> lock(log.mutex);
    prompts = log.prompts;
  }
  REQUIRE(prompts.size() >= 2);
  CHECK(prompts[0].find("The previous attempt failed") == std::string::npos);
  CHECK_THAT(prompts[1], Catch::Contains("The previous attempt failed") && Catch::Contains("do not repeat it") &&
                             Catch::Contains("Lessons from the last rounds") && Catch::Contains("Avoid:") &&
                             Catch::Contains("idea 0 for the silu tiles"));

  const json lessons = ReadJson(run_dir / "lessons.json")["cases"]["silu_M256_N1024"];
  REQUIRE(lessons.size() >= 2);
  CHECK(lessons[0]["category"] == "error");
  CHECK(lessons[1]["category"] == "improved");
  CHECK(ReadJson(run_dir / "optimize_results.json")["rows"][0]["status"] == "improved");
  // The executor was asked for a diff, and the kept kernel came from one.
  CHECK_THAT(prompts[1], Catch::Contains("Current kernel (kernel.py):"));
  const std::string kept = experiments[1]["candidate"];
  bool from_diff = false;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(run_dir / "stages")) {
    if (entry.path().filename() == kept + ".json") from_diff = ReadJson(entry.path()).value("edit", "") == "diff";
    if (from_diff) break;
  }
  CHECK(from_diff);
  CHECK(std::filesystem::exists(run_dir / "llm" / "transcript.jsonl"));
}
