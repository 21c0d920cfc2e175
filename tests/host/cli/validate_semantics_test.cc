// `validate` catches what the run would only find later (an unknown problem,
// a missing benchmark folder, a negative budget), and a run whose load failed
// names that first cause instead of follow-on errors (issue 36, item 7).
#include <catch2/catch.hpp>

#include "support/test_support.h"

using namespace accelopt::testing;
using nlohmann::json;

namespace {

CommandResult Validate(const std::string& pipeline, const std::vector<std::string>& sets) {
  std::vector<std::string> args{"validate", SourcePath(pipeline).string()};
  for (const auto& set : sets) {
    args.push_back("--set");
    args.push_back(set);
  }
  return RunHost(args);
}

}  // namespace

TEST_CASE("validate refuses a problem name the benchmark does not have", "[cli][validate]") {
  for (const char* pipeline : {"pipelines/nkibench-profile.yaml", "pipelines/nkibench-optimize.yaml",
                               "pipelines/nkibench-mcgs.yaml", "pipelines/nkibench-agent.yaml"}) {
    INFO(pipeline);
    auto result = Validate(pipeline, {"vars.problems=[silu, slu]"});
    INFO(result.output);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.output, Catch::Contains("'slu'") && Catch::Contains("did you mean 'silu'") &&
                                  Catch::Contains("summary.json"));
  }
  CHECK(Validate("pipelines/nkibench-optimize.yaml", {"vars.problems=[silu, adamw]"}).exit_code == 0);
}

TEST_CASE("validate refuses a vars.nkibench folder that does not exist", "[cli][validate]") {
  auto result = Validate("pipelines/nkibench-optimize.yaml", {"vars.nkibench=/tmp/accelopt-no-such-benchmark"});
  INFO(result.output);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.output, Catch::Contains("/tmp/accelopt-no-such-benchmark") &&
                                Catch::Contains("must name an existing directory"));
}

TEST_CASE("validate refuses a negative budget in every search pipeline", "[cli][validate]") {
  for (const char* pipeline : {"pipelines/nkibench-optimize.yaml", "pipelines/nkibench-mcgs.yaml",
                               "pipelines/nkibench-agent.yaml"}) {
    INFO(pipeline);
    auto result = Validate(pipeline, {"vars.budget=-3"});
    INFO(result.output);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.output, Catch::Contains("budget") && Catch::Contains("must be >= 0, got -3"));
  }
}

TEST_CASE("after a failed load, later stages are skipped with the first cause named, not follow-on errors",
          "[cli][validate][e2e]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "empty");  // exists (validate passes), holds no summary.json
  auto run_dir = dir.path() / "run";
  auto result = RunHostWithEnv({"ACCELOPT_NO_PROGRESS=1"},
                               {"run", SourcePath("pipelines/nkibench-optimize.yaml").string(), "--set",
                                "vars.nkibench=" + (dir.path() / "empty").string(), "--run-dir", run_dir.string()});
  INFO(result.output);
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.output, Catch::Contains("no summary.json"));
  CHECK_THAT(result.output, !Catch::Contains("attempt to index a nil value"));
  CHECK_THAT(result.output, !Catch::Contains("resolved to null"));
  CHECK_THAT(result.output, Catch::Contains("stage results skipped") && Catch::Contains("first cause"));
  json run = ReadJson(run_dir / "run.json");
  CHECK(run["failed_stages"] == 1);  // load only
  CHECK(run["error"]["stage"] == "load");
  CHECK_THAT(run["error"]["message"].get<std::string>(), Catch::Contains("no summary.json"));
}
