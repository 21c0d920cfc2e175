#include "host/pipeline/pipeline_fixture.h"

using namespace accelopt;
using accelopt::testing::PipelineFixture;

namespace {

std::string ValidationError(PipelineFixture& fixture, const std::string& yaml) {
  try {
    fixture.Load(yaml);
    return "";
  } catch (const ConfigError& error) {
    return error.what();
  }
}

}  // namespace

TEST_CASE("unknown stages get a did-you-mean", "[pipeline][validate]") {
  PipelineFixture f;
  CHECK_THAT(ValidationError(f, "version: 1\nname: t\nstages:\n  - id: a\n    uses: native:test_ech\n"),
             Catch::Contains("pipeline.yaml:5:11: error: unknown stage 'native:test_ech' (did you mean 'test_echo'?)"));
  CHECK_THAT(ValidationError(f, "version: 1\nname: t\nstages:\n  - id: a\n    uses: python:x\n"),
             Catch::Contains("unknown stage scheme in 'python:x'"));
  CHECK_THAT(ValidationError(f, "version: 1\nname: t\nstages:\n  - id: a\n    uses: lua:missing.lua\n"),
             Catch::Contains("Lua stage script not found"));
}

TEST_CASE("stage parameters are checked: unknown, missing, mistyped", "[pipeline][validate]") {
  PipelineFixture f;
  std::string error = ValidationError(f, "version: 1\nname: t\nstages:\n  - id: a\n    uses: native:test_add\n    with:\n      b: two\n      c: 1\n");
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:7:10: error: parameter 'b' of native:test_add must be of type integer, got string \"two\""));
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:8:10: error: stage native:test_add has no parameter 'c' (did you mean 'a'?)"));
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:4:5: error: stage 'a' (native:test_add) is missing required parameter 'a'"));
}

TEST_CASE("expressions are syntax-checked and may only use earlier stages", "[pipeline][validate]") {
  PipelineFixture f;
  std::string error = ValidationError(f,
      "version: 1\nname: t\nstages:\n"
      "  - id: first\n    uses: native:test_echo\n    with: {value: '${{ stages.secnd.outputs }}'}\n"
      "  - id: second\n    uses: native:test_echo\n    with: {value: '${{ 1 + }}'}\n");
  CHECK_THAT(error, Catch::Contains("refers to stage 'secnd', which is not defined before this point"));
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:9:19: error: bad expression '${{ 1 + }}'"));
  CHECK(ValidationError(f, "version: 1\nname: t\nstages:\n  - id: a\n    uses: native:test_echo\n    with: {value: '${{ 1 + 2'}\n")
            .find("unterminated") != std::string::npos);
}

TEST_CASE("the shipped pipelines validate", "[pipeline][validate]") {
  PipelineFixture f;
  for (const auto& entry : std::filesystem::directory_iterator(accelopt::testing::SourcePath("pipelines"))) {
    if (entry.path().extension() != ".yaml") continue;
    INFO(entry.path());
    Pipeline pipeline = LoadPipeline(entry.path());
    CHECK_NOTHROW(ValidatePipeline(pipeline, f.registry()));
  }
}
