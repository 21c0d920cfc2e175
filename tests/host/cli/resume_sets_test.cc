// `run --resume DIR --set ...` applies vars.* and llm.* and says so, refuses
// backend.* and name with exit 2, and never silently ignores a --set (issue 36, item 3).
#include <catch2/catch.hpp>

#include <fstream>
#include <set>

#include "support/test_support.h"

using namespace accelopt::testing;
using nlohmann::json;

namespace {

const char* kPipeline = R"(version: 1
name: resumable_sets
vars:
  n: 1
backend:
  target: trn1
stages:
  - id: echo
    uses: native:test_echo
    with: {value: "${{ vars.n }}"}
)";

std::vector<std::string> Env() { return {std::string("ACCELOPT_PLUGIN_PATH=") + ACCELOPT_TEST_PLUGIN_DIR, "ACCELOPT_NO_PROGRESS=1"}; }

}  // namespace

TEST_CASE("resume applies a --set vars value, says so and records it", "[cli][resume]") {
  TempDir dir;
  auto pipeline = dir.Write("p.yaml", kPipeline);
  auto run_dir = dir.path() / "run";
  REQUIRE(RunHostWithEnv(Env(), {"run", pipeline.string(), "--run-dir", run_dir.string()}).exit_code == 0);
  CHECK(ReadJson(run_dir / "stages/01-echo/outputs.json")["value"] == 1);

  auto resumed = RunHostWithEnv(Env(), {"run", "--resume", run_dir.string(), "--set", "vars.n=2"});
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.output, Catch::Contains("resume: applying --set vars.n=2"));
  CHECK(ReadJson(run_dir / "stages/01-echo/outputs.json")["value"] == 2);
  json run = ReadJson(run_dir / "run.json");
  CHECK(run["sets"] == json::array({"vars.n=2"}));
  CHECK(run["resume_sets"][0]["sets"] == json::array({"vars.n=2"}));

  // A later resume without --set keeps the applied value.
  REQUIRE(RunHostWithEnv(Env(), {"run", "--resume", run_dir.string()}).exit_code == 0);
  CHECK(ReadJson(run_dir / "stages/01-echo/outputs.json")["value"] == 2);
}

TEST_CASE("resume refuses a --set that would mix backends, with exit 2 and why", "[cli][resume]") {
  TempDir dir;
  auto pipeline = dir.Write("p.yaml", kPipeline);
  auto run_dir = dir.path() / "run";
  REQUIRE(RunHostWithEnv(Env(), {"run", pipeline.string(), "--run-dir", run_dir.string()}).exit_code == 0);
  auto refused = RunHostWithEnv(Env(), {"run", "--resume", run_dir.string(), "--set", "backend.target=trn2"});
  INFO(refused.output);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("cannot change backend.target when resuming"));
  CHECK(ReadJson(run_dir / "run.json")["status"] == "succeeded");  // untouched
  // A typo is a usage error too, as for a fresh run.
  auto typo = RunHostWithEnv(Env(), {"run", "--resume", run_dir.string(), "--set", "vars.m=3"});
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.output, Catch::Contains("no variable 'm'"));
}

TEST_CASE("resuming a beam search with a larger budget continues it without duplicate records",
          "[cli][resume][e2e]") {
  TempDir dir;
  auto run_dir = dir.path() / "run";
  const std::vector<std::string> args{"run", SourcePath("pipelines/nkibench-optimize.yaml").string(), "--run-dir",
                                      run_dir.string(), "--set", "vars.cases=small", "--set", "vars.problems=[silu]",
                                      "--set", "vars.iterations=1", "--set", "vars.plans=4", "--set", "vars.budget=2",
                                      "--set", "vars.mode=rules"};
  auto first = RunHostWithEnv({"ACCELOPT_NO_PROGRESS=1"}, args);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  auto count_records = [&] {
    std::ifstream in(run_dir / "optimize/records.jsonl");
    std::vector<std::string> ids;
    for (std::string line; std::getline(in, line);) ids.push_back(json::parse(line)["id"]);
    return ids;
  };
  CHECK(count_records().size() == 2);
  auto resumed = RunHostWithEnv({"ACCELOPT_NO_PROGRESS=1"}, {"run", "--resume", run_dir.string(), "--set", "vars.budget=4"});
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.output, Catch::Contains("resume: applying --set vars.budget=4 (the run had vars.budget=2)"));
  auto ids = count_records();
  CHECK(ids.size() == 4);
  CHECK(std::set<std::string>(ids.begin(), ids.end()).size() == ids.size());
  CHECK(ReadJson(run_dir / "optimize_results.json")["rows"][0]["candidates"]["candidates"] == 4);
}
