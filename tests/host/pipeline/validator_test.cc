#include "host/pipeline/pipeline_fixture.h"

using namespace accelopt;
using accelopt::testing::PipelineFixture;

namespace {

std::string ValidationError(PipelineFixture& fixture, const std::string& yaml, const std::vector<std::string>& sets = {}) {
  try {
    fixture.Load(yaml, sets);
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

TEST_CASE("closed sets: a value outside a parameter's enum fails validation", "[pipeline][validate]") {
  PipelineFixture f;
  std::string error = ValidationError(f,
      "version: 1\nname: t\nstages:\n  - id: load\n    uses: native:nkibench_load\n"
      "    with: {dir: /tmp, cases: smal}\n");
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:6:30: error: parameter 'cases' of native:nkibench_load must be one of "
                                    "full, small, all, got \"smal\" (did you mean 'small'?)"));
  // Through a var (also as --set would set it): resolved at validate time.
  error = ValidationError(f,
      "version: 1\nname: t\nvars:\n  cases: full\nstages:\n  - id: load\n    uses: native:nkibench_load\n"
      "    with: {dir: /tmp, cases: '${{ vars.cases }}'}\n",
      {"vars.cases=smal"});
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:8:30: error: parameter 'cases' of native:nkibench_load must be one of "
                                    "full, small, all, got \"smal\" (did you mean 'small'?) (from ${{ vars.cases }})"));
  CHECK(ValidationError(f, "version: 1\nname: t\nstages:\n  - id: c\n    uses: native:test_choice\n    with: {mode: slow}\n").empty());
}

TEST_CASE("a required parameter whose expression gives null is reported as missing", "[pipeline][validate]") {
  PipelineFixture f;
  std::string error = ValidationError(f,
      "version: 1\nname: t\nvars: {n: 1}\nstages:\n  - id: a\n    uses: native:test_add\n    with:\n      a: ${{ vars.nope }}\n");
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:8:10: error: required parameter 'a' of native:test_add is missing: "
                                    "${{ vars.nope }} resolved to null"));
  error = ValidationError(f,
      "version: 1\nname: t\nvars: {n: one}\nstages:\n  - id: a\n    uses: native:test_add\n    with:\n      a: ${{ vars.n }}\n");
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:8:10: error: parameter 'a' of native:test_add must be of type integer, "
                                    "got string \"one\" (from ${{ vars.n }})"));
}

TEST_CASE("expression names are checked where they are used", "[pipeline][validate]") {
  PipelineFixture f;
  std::string error = ValidationError(f,
      "version: 1\nname: t\nvars: {x: 1}\nstages:\n  - id: a\n    uses: native:test_echo\n    with:\n      value: ${{ var.x }}\n");
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:8:14: error: unknown name 'var' in ${{ var.x }} (did you mean 'vars'?); "
                                    "names here: backend, pipeline, run, stages, vars"));
  // The for_each item name exists in `with`, not after the stage.
  error = ValidationError(f,
      "version: 1\nname: t\nstages:\n  - id: a\n    uses: native:test_echo\n    for_each: [1, 2]\n    as: kcase\n"
      "    with: {value: '${{ kcse + index }}'}\n"
      "  - id: b\n    uses: native:test_echo\n    with: {value: '${{ kcase }}'}\n");
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:8:19: error: unknown name 'kcse' in ${{ kcse + index }} (did you mean 'kcase'?)"));
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:11:19: error: unknown name 'kcase'"));
  // Loop names only inside loops; fields, strings and table keys are not names.
  error = ValidationError(f,
      "version: 1\nname: t\nstages:\n  - id: a\n    uses: native:test_echo\n"
      "    with: {value: '${{ carry.x }}', other: 1}\n");
  CHECK_THAT(error, Catch::Contains("unknown name 'carry'"));
  CHECK(ValidationError(f,
            "version: 1\nname: t\nvars: {s: abc}\nstages:\n  - id: a\n    uses: native:test_echo\n"
            "    with: {value: \"${{ {k = vars.s:upper(), n = len('x.y'), m = math.max(1, 2)} }}\"}\n")
            .empty());
}

TEST_CASE("references to earlier stages' outputs are checked against their declared outputs", "[pipeline][validate]") {
  PipelineFixture f;
  const std::string head = "version: 1\nname: t\nstages:\n  - id: add\n    uses: native:test_add\n    with: {a: 1}\n"
                           "  - id: fan\n    uses: native:test_echo\n    for_each: [1]\n";
  std::string error = ValidationError(f, head + "  - id: use\n    uses: native:test_echo\n    with: {value: '${{ stages.add.outputs.summ }}'}\n");
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:12:19: error: in ${{ stages.add.outputs.summ }}: stage 'add' "
                                    "(native:test_add) has no output 'summ' (did you mean 'sum'?); its outputs are sum"));
  error = ValidationError(f, head + "  - id: use\n    uses: native:test_echo\n    with: {value: '${{ stages.add.outptus }}'}\n");
  CHECK_THAT(error, Catch::Contains("stages.add has no field 'outptus' (did you mean 'outputs'?)"));
  error = ValidationError(f, head + "  - id: use\n    uses: native:test_echo\n    with: {value: '${{ stages.fan.outputs.value }}'}\n");
  CHECK_THAT(error, Catch::Contains("stages.fan.outputs is a list (stage 'fan' is a for_each fan-out"));
  // Stages without declared outputs are not checked; declared ones pass.
  CHECK(ValidationError(f, head + "  - id: use\n    uses: native:test_echo\n"
                                  "    with: {value: '${{ stages.add.outputs.sum + stages.fan.outputs[1].value }}'}\n")
            .empty());
}

TEST_CASE("a Lua stage's outputs and enums are checked like a native stage's", "[pipeline][validate]") {
  PipelineFixture f;
  f.dir().Write("stage.lua",
                "return {\n  params = { mode = { type = 'string', enum = { 'a', 'b' }, default = 'a' } },\n"
                "  outputs = { total = { type = 'integer', doc = 'the total' } },\n"
                "  run = function(input) return { total = 1 } end,\n}\n");
  std::string error = ValidationError(f,
      "version: 1\nname: t\nstages:\n  - id: s\n    uses: lua:stage.lua\n    with: {mode: c}\n"
      "  - id: u\n    uses: native:test_echo\n    with: {value: '${{ stages.s.outputs.totl }}'}\n");
  CHECK_THAT(error, Catch::Contains("parameter 'mode' of lua:stage.lua must be one of a, b, got \"c\""));
  CHECK_THAT(error, Catch::Contains("has no output 'totl' (did you mean 'total'?)"));
  f.dir().Write("bad.lua", "return {\n  params = { mode = { type = 'string', enum = { 1 } } },\n  run = function() end,\n}\n");
  CHECK_THAT(ValidationError(f, "version: 1\nname: t\nstages:\n  - id: s\n    uses: lua:bad.lua\n"),
             Catch::Contains("params.mode.enum: value 1 is not of type string"));
}

TEST_CASE("vars, timeouts and the llm: block are checked as the run would use them", "[pipeline][validate]") {
  PipelineFixture f;
  std::string error = ValidationError(f,
      "version: 1\nname: t\nvars:\n  a: ${{ vars.b.c }}\nstages:\n  - id: a\n    uses: native:test_echo\n");
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:4:6: error: error in ${{ vars.b.c }}: attempt to index a nil value (field 'b')"));
  error = ValidationError(f,
      "version: 1\nname: t\nvars: {t: soon}\nstages:\n  - id: a\n    uses: native:test_echo\n    timeout: ${{ vars.t }}\n");
  CHECK_THAT(error, Catch::Contains("timeout ${{ vars.t }} resolves to \"soon\""));
  CHECK(ValidationError(f, "version: 1\nname: t\nstages:\n  - id: a\n    uses: native:test_echo\n    timeout: 1m30s\n").empty());
  error = ValidationError(f,
      "version: 1\nname: t\nllm:\n  planner:\n    base_url: http://127.0.0.1:9/v1\n    model: m\n    timeout: abc\n"
      "stages:\n  - id: a\n    uses: native:test_echo\n");
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:7:14: error: llm.planner.timeout: invalid duration \"abc\""));
  CHECK(ValidationError(f,
            "version: 1\nname: t\nllm:\n  planner:\n    base_url: http://127.0.0.1:9/v1\n    model: m\n    timeout: 1m30s\n"
            "stages:\n  - id: a\n    uses: native:test_echo\n")
            .empty());
}

TEST_CASE("for_each lists and loop bounds known before the run are checked", "[pipeline][validate]") {
  PipelineFixture f;
  std::string error = ValidationError(f,
      "version: 1\nname: t\nvars: {items: abc, n: 0}\nstages:\n"
      "  - id: a\n    uses: native:test_echo\n    for_each: ${{ vars.items }}\n"
      "  - id: l\n    loop: {max_iterations: '${{ vars.n }}'}\n    stages:\n      - {id: e, uses: native:test_echo}\n");
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:7:15: error: for_each must resolve to a list, got string \"abc\""));
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:9:11: error: max_iterations ${{ vars.n }} resolves to 0; expected an integer >= 1"));
  CHECK(ValidationError(f, "version: 1\nname: t\nvars: {items: [1, 2], n: 2}\nstages:\n"
                           "  - id: a\n    uses: native:test_echo\n    for_each: ${{ vars.items }}\n"
                           "  - id: l\n    loop: {max_iterations: '${{ vars.n }}'}\n    stages:\n      - {id: e, uses: native:test_echo}\n")
            .empty());
}
