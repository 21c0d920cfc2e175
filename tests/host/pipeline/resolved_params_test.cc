// Values known only at run time are checked when the stage starts, with
// validate's messages plus the YAML location and the expression text.
#include "host/pipeline/pipeline_fixture.h"

using namespace accelopt;
using accelopt::testing::PipelineFixture;
using accelopt::testing::ReadJson;

TEST_CASE("a required value that resolves to null at run time is reported as missing, with location and expression",
          "[pipeline][params]") {
  PipelineFixture f;
  auto run = f.Run(
      "version: 1\nname: t\nstages:\n"
      "  - id: r\n    uses: native:test_return\n    with: {value: {v: 1}}\n"
      "  - id: add\n    uses: native:test_add\n    with:\n      a: ${{ stages.r.outputs.w }}\n");
  CHECK(run.result.ExitCode() == 1);
  auto status = ReadJson(run.run_dir / "stages/02-add/status.json");
  CHECK(status["error"]["kind"] == "config_error");
  CHECK_THAT(status["error"]["message"].get<std::string>(),
             Catch::Contains("pipeline.yaml:10:10: required parameter 'a' of native:test_add is missing: "
                             "${{ stages.r.outputs.w }} resolved to null"));
}

TEST_CASE("a value outside a closed set at run time gets validate's message", "[pipeline][params]") {
  PipelineFixture f;
  auto run = f.Run(
      "version: 1\nname: t\nstages:\n"
      "  - id: r\n    uses: native:test_return\n    with: {value: {m: slwo}}\n"
      "  - id: c\n    uses: native:test_choice\n    with:\n      mode: ${{ stages.r.outputs.m }}\n");
  CHECK(run.result.ExitCode() == 1);
  auto status = ReadJson(run.run_dir / "stages/02-c/status.json");
  CHECK_THAT(status["error"]["message"].get<std::string>(),
             Catch::Contains("pipeline.yaml:10:13: parameter 'mode' of native:test_choice must be one of fast, slow, got \"slwo\" "
                             "(did you mean 'slow'?) (from ${{ stages.r.outputs.m }})"));
}
