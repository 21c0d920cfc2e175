// The reports of the three search pipelines and of a FlashInfer-Bench evaluation
// show their own run's facts: the page's best-kernel numbers are those of
// best/ and the records, and each page names its own kind (issue 36, items 1 and 8).
// The checks are tests/python/report/report_truth.py, run in the test's interpreter.
#include <catch2/catch.hpp>

#include <fstream>

#include "python/interpreter.h"
#include "support/test_support.h"

using namespace accelopt::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

int Check(const std::string& function, const json& args) {
  json result = accelopt::python::CallJsonArgs("report.report_truth", function, args);
  return result.get<int>();
}

CommandResult RunSearch(const std::string& pipeline, const fs::path& run_dir, const std::vector<std::string>& sets) {
  std::vector<std::string> args{"run", SourcePath(pipeline).string(), "--run-dir", run_dir.string(), "--set",
                                "vars.cases=small", "--set", "vars.problems=[silu, rmsnorm_matmul]", "--set", "vars.mode=rules",
                                // Screens on seed 0 too: what is checked here is the report, and at the time of
                                // writing hidden-only screens of one problem could all get one latency.
                                "--set", "vars.screen_hidden_only=false"};
  for (const auto& set : sets) {
    args.push_back("--set");
    args.push_back(set);
  }
  return RunHostWithEnv({"ACCELOPT_NO_PROGRESS=1"}, args);
}

void CheckKind(const fs::path& run_dir, const std::string& kind) {
  json summary = accelopt::python::CallJson("accelopt.report", "summarize_run", {{"run_dir", run_dir.string()}});
  CHECK(summary["kind"] == kind);
}

}  // namespace

TEST_CASE("the beam search's report shows its best kernels from best/ and the records", "[report][e2e][truth]") {
  TempDir dir;
  auto result = RunSearch("pipelines/nkibench-optimize.yaml", dir.path() / "run", {"vars.iterations=2", "vars.plans=3"});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK(Check("check_search_run", json::array({(dir.path() / "run").string(), "optimize-beam", "beam search"})) >= 1);
  CheckKind(dir.path() / "run", "optimize-beam");
}

TEST_CASE("the graph search's report shows its own best kernels and calls itself a graph search", "[report][e2e][truth]") {
  TempDir dir;
  auto result = RunSearch("pipelines/nkibench-mcgs.yaml", dir.path() / "run", {"vars.budget=8", "vars.min_gain=0"});  // any faster kernel is a best kernel to check
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK(Check("check_search_run", json::array({(dir.path() / "run").string(), "optimize-mcgs", "graph search"})) >= 1);
  CheckKind(dir.path() / "run", "optimize-mcgs");
}

TEST_CASE("the agent's report shows its own best kernels and calls itself the reflexion agent", "[report][e2e][truth]") {
  TempDir dir;
  auto result = RunSearch("pipelines/nkibench-agent.yaml", dir.path() / "run", {"vars.budget=4"});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK(Check("check_search_run", json::array({(dir.path() / "run").string(), "agent", "reflexion agent"})) >= 1);
  CheckKind(dir.path() / "run", "agent");
}

TEST_CASE("a FlashInfer-Bench evaluation's report shows its statuses and speedups, not the generic page",
          "[report][e2e][truth][flashinfer]") {
  TempDir dir;
  const fs::path run_dir = dir.path() / "run";
  auto result = RunHostWithEnv({"ACCELOPT_NO_PROGRESS=1"},
                               {"run", SourcePath("pipelines/flashinfer-profile.yaml").string(), "--run-dir", run_dir.string(),
                                "--set", "vars.trials=1", "--set", "vars.warmup=1", "--set", "vars.iterations=3", "--set",
                                "vars.max_workloads=2", "--set", "vars.isolation=inprocess"});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK(Check("check_flashinfer_run", json::array({run_dir.string()})) >= 2);
  CheckKind(run_dir, "flashinfer");
  // summary.txt: nothing evaluated is said, and a solution not run is one line, not one per workload
  std::ifstream in(run_dir / "summary.txt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, !Catch::Contains("x0.000"));
  CHECK_THAT(text, Catch::Contains("none evaluated"));
  size_t lines = 0;
  for (size_t at = text.find("triton_rmsnorm_dps: not run"); at != std::string::npos; at = text.find("triton_rmsnorm_dps: not run", at + 1)) ++lines;
  CHECK(lines == 1);
}
