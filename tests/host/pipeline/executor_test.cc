#include "host/pipeline/pipeline_fixture.h"

using namespace accelopt;
using accelopt::testing::PipelineFixture;
using accelopt::testing::ReadJson;
using nlohmann::json;

TEST_CASE("stage outputs flow through typed expressions", "[pipeline][executor]") {
  PipelineFixture f;
  auto run = f.Run(
      "version: 1\nname: t\nvars: {n: 20, label: x}\nstages:\n"
      "  - id: add\n    uses: native:test_add\n    with: {a: '${{ vars.n }}', b: 22}\n"
      "  - id: echo\n    uses: native:test_echo\n"
      "    with: {value: {sum: '${{ stages.add.outputs.sum }}', text: 'sum=${{ stages.add.outputs.sum }} of ${{ vars.label }}', list: '${{ {1, 2, 3} }}'}}\n");
  REQUIRE(run.result.ExitCode() == 0);
  json out = ReadJson(run.run_dir / "stages/02-echo/outputs.json");
  CHECK(out["value"]["sum"] == 42);  // one expression keeps its JSON type
  CHECK(out["value"]["text"] == "sum=42 of x");
  CHECK(out["value"]["list"] == json::array({1, 2, 3}));
  json inputs = ReadJson(run.run_dir / "stages/01-add/inputs.json");
  CHECK(inputs["with"]["a"] == 20);
  CHECK(ReadJson(run.run_dir / "stages/01-add/status.json")["status"] == "ok");
}

TEST_CASE("for_each fans out in parallel and keeps item order", "[pipeline][executor]") {
  PipelineFixture f;
  auto run = f.Run(
      "version: 1\nname: t\nvars: {items: [5, 6, 7, 8]}\nstages:\n"
      "  - id: fan\n    for_each: '${{ vars.items }}'\n    as: x\n    max_parallel: 4\n"
      "    uses: native:test_concurrent\n    with: {ms: '${{ 200 + x - x }}'}\n"
      "  - id: order\n    for_each: '${{ vars.items }}'\n    max_parallel: 3\n"
      "    uses: native:test_echo\n    with: {value: '${{ item * 10 }}'}\n"
      "  - id: pick\n    uses: native:test_echo\n    with: {value: '${{ len(stages.fan.outputs) }}'}\n");
  REQUIRE(run.result.ExitCode() == 0);
  // Items overlapped (sleep-based, so this holds however loaded the machine is).
  int peak = 0;
  for (const auto& item : ReadJson(run.run_dir / "stages/01-fan/outputs.json")) peak = std::max(peak, item["max_in_flight"].get<int>());
  CHECK(peak >= 2);
  CHECK(peak <= 4);
  json order = ReadJson(run.run_dir / "stages/02-order/outputs.json");
  for (int i = 0; i < 4; ++i) CHECK(order[i]["value"] == (5 + i) * 10);
  CHECK(ReadJson(run.run_dir / "stages/03-pick/outputs.json")["value"] == 4);
  CHECK(std::filesystem::exists(run.run_dir / "stages/01-fan/item-0003/outputs.json"));
}

TEST_CASE("a failing item is recorded and the other items finish", "[pipeline][executor]") {
  PipelineFixture f;
  auto run = f.Run(
      "version: 1\nname: t\nstages:\n"
      "  - id: fan\n    for_each: '${{ {false, true, false} }}'\n    on_failure: continue\n"
      "    uses: native:test_maybe_fail\n    with: {fail: '${{ item }}', kind: compile_error}\n"
      "  - id: after\n    uses: native:test_echo\n    with: {value: '${{ stages.fan.outputs[2].error.kind }}'}\n");
  CHECK(run.result.failed_items == 1);
  CHECK(run.result.ExitCode() == 1);
  json outputs = ReadJson(run.run_dir / "stages/01-fan/outputs.json");
  CHECK(outputs[0]["ok"] == true);
  CHECK(outputs[1]["error"]["kind"] == "compile_error");
  CHECK(outputs[2]["ok"] == true);
  CHECK(ReadJson(run.run_dir / "stages/02-after/outputs.json")["value"] == "compile_error");
}

TEST_CASE("items reporting ok: false count as failed unless the stage ignores them", "[pipeline][executor]") {
  PipelineFixture f;
  const std::string stage = "  - id: fan\n    for_each: '${{ {true, false} }}'\n    uses: native:test_return\n"
                            "    with: {value: {ok: '${{ item }}'}}\n";
  auto counted = f.Run("version: 1\nname: t\nstages:\n" + stage);
  CHECK(counted.result.failed_items == 1);
  CHECK(counted.result.ExitCode() == 1);
  auto ignored = f.Run("version: 1\nname: t\nstages:\n" + stage + "    failed_items: ignore\n");
  CHECK(ignored.result.failed_items == 0);
  CHECK(ignored.result.ExitCode() == 0);
}

TEST_CASE("a failed stage stops the run except for if: always() stages", "[pipeline][executor]") {
  PipelineFixture f;
  auto run = f.Run(
      "version: 1\nname: t\nstages:\n"
      "  - {id: bad, uses: native:test_maybe_fail, with: {fail: true}}\n"
      "  - {id: skipped, uses: native:test_echo}\n"
      "  - {id: cleanup, uses: native:test_echo, if: '${{ always() }}', with: {value: '${{ failure() }}'}}\n");
  CHECK(run.result.status == "failed");
  CHECK(run.result.stages["bad"]["error"]["kind"] == "boom");
  CHECK(run.result.stages["skipped"]["status"] == "skipped");
  CHECK(run.result.stages["cleanup"]["status"] == "ok");
  CHECK(ReadJson(run.run_dir / "stages/03-cleanup/outputs.json")["value"] == true);
}

TEST_CASE("if: false skips a stage", "[pipeline][executor]") {
  PipelineFixture f;
  auto run = f.Run("version: 1\nname: t\nvars: {on: false}\nstages:\n  - {id: a, uses: native:test_echo, if: '${{ vars.on }}'}\n");
  CHECK(run.result.ExitCode() == 0);
  CHECK(run.result.stages["a"]["status"] == "skipped");
}

TEST_CASE("retry re-runs a failing stage up to max_attempts", "[pipeline][executor]") {
  PipelineFixture f;
  auto ok = f.Run("version: 1\nname: t\nstages:\n  - {id: a, uses: native:test_flaky, with: {failures: 2, key: r1}, retry: {max_attempts: 3, backoff: 1ms}}\n");
  CHECK(ok.result.ExitCode() == 0);
  CHECK(ReadJson(ok.run_dir / "stages/01-a/outputs.json")["calls"] == 3);
  auto bad = f.Run("version: 1\nname: t\nstages:\n  - {id: a, uses: native:test_flaky, with: {failures: 5, key: r2}, retry: {max_attempts: 2, on: [transient]}}\n");
  CHECK(bad.result.status == "failed");
  CHECK(ReadJson(bad.run_dir / "stages/01-a/status.json")["attempts"] == 2);
  auto not_retried = f.Run("version: 1\nname: t\nstages:\n  - {id: a, uses: native:test_flaky, with: {failures: 5, key: r3}, retry: {max_attempts: 4, on: [timeout]}}\n");
  CHECK(ReadJson(not_retried.run_dir / "stages/01-a/status.json")["attempts"] == 1);
}

TEST_CASE("a stage past its timeout fails with kind timeout", "[pipeline][executor]") {
  PipelineFixture f;
  auto run = f.Run("version: 1\nname: t\nstages:\n  - {id: slow, uses: native:test_sleep, with: {ms: 5000}, timeout: 100ms}\n");
  CHECK(run.result.status == "failed");
  CHECK(run.result.stages["slow"]["error"]["kind"] == "timeout");
}

TEST_CASE("a timeout may be an expression resolved when the stage starts", "[pipeline][executor]") {
  PipelineFixture f;
  const std::string pipeline =
      "version: 1\nname: t\nvars: {limit: 10m}\nstages:\n"
      "  - {id: slow, uses: native:test_sleep, with: {ms: 5000}, timeout: '${{ vars.limit }}'}\n";
  auto seconds = f.Run(pipeline, {"vars.limit=0.1"});  // a number of seconds
  CHECK(seconds.result.stages["slow"]["error"]["kind"] == "timeout");
  CHECK_THAT(seconds.result.stages["slow"]["error"]["message"].get<std::string>(), Catch::Contains("100 ms"));
  auto text = f.Run(pipeline, {"vars.limit=150ms"});
  CHECK(text.result.stages["slow"]["error"]["kind"] == "timeout");
  // A value known before the run is checked by validate (run exits 2 before it starts).
  CHECK_THROWS_WITH(f.Run(pipeline, {"vars.limit=soon"}),
                    Catch::Contains("pipeline.yaml:5") && Catch::Contains("resolves to \"soon\""));
  // One known only at run time fails the stage with config_error.
  auto bad = f.Run(
      "version: 1\nname: t\nstages:\n  - {id: r, uses: native:test_return, with: {value: {t: soon}}}\n"
      "  - {id: slow, uses: native:test_sleep, with: {ms: 5000}, timeout: '${{ stages.r.outputs.t }}'}\n");
  CHECK(bad.result.stages["slow"]["error"]["kind"] == "config_error");
  CHECK_THAT(bad.result.stages["slow"]["error"]["message"].get<std::string>(),
             Catch::Contains("pipeline.yaml:5") && Catch::Contains("resolved to \"soon\""));
}

TEST_CASE("stages fed by a failed stage are skipped, independent ones still run", "[pipeline][executor]") {
  PipelineFixture f;
  auto run = f.Run(
      "version: 1\nname: t\nstages:\n"
      "  - {id: bad, uses: native:test_flaky, with: {failures: 5, key: up1}, on_failure: continue}\n"
      "  - {id: fed, uses: native:test_echo, with: {value: '${{ stages.bad.outputs }}'}}\n"
      "  - {id: fed2, uses: native:test_echo, with: {value: '${{ stages.fed.outputs }}'}}\n"
      "  - {id: other, uses: native:test_echo, with: {value: 1}}\n"
      "  - {id: report, uses: native:test_echo, with: {value: '${{ stages.bad.status }}'}, if: '${{ always() }}'}\n");
  CHECK(run.result.failed_stages == 1);
  CHECK(run.result.stages["bad"]["status"] == "failed");
  CHECK(run.result.stages["fed"]["status"] == "skipped");
  CHECK(run.result.stages["fed2"]["status"] == "skipped");  // transitively
  CHECK(run.result.stages["other"]["status"] == "ok");
  CHECK(run.result.stages["report"]["status"] == "ok");  // asked to run after failures
}

TEST_CASE("a loop runs until its condition with carried state", "[pipeline][executor]") {
  PipelineFixture f;
  auto run = f.Run(
      "version: 1\nname: t\nstages:\n"
      "  - id: opt\n    loop:\n      max_iterations: 10\n      until: '${{ carry.total >= 6 }}'\n      carry: {total: 0}\n"
      "    stages:\n"
      "      - id: step\n        uses: native:test_add\n        with: {a: '${{ carry.total }}', b: '${{ loop.iteration + 1 }}'}\n"
      "        carry: {total: '${{ outputs.sum }}'}\n"
      "  - id: after\n    uses: native:test_echo\n    with: {value: '${{ stages.opt.outputs }}'}\n");
  REQUIRE(run.result.ExitCode() == 0);
  json value = ReadJson(run.run_dir / "stages/02-after/outputs.json")["value"];
  CHECK(value["iterations"] == 3);  // totals 1, 3, 6
  CHECK(value["carry"]["total"] == 6);
  CHECK(value["last"]["step"]["outputs"]["sum"] == 6);
  CHECK(std::filesystem::exists(run.run_dir / "stages/01-opt/iter-2/01-step/outputs.json"));
}

TEST_CASE("a loop stops at max_iterations", "[pipeline][executor]") {
  PipelineFixture f;
  auto run = f.Run(
      "version: 1\nname: t\nvars: {n: 2}\nstages:\n"
      "  - id: l\n    loop: {max_iterations: '${{ vars.n }}', until: 'false'}\n"
      "    stages:\n      - {id: e, uses: native:test_echo, with: {value: '${{ loop.iteration }}'}}\n");
  REQUIRE(run.result.ExitCode() == 0);
  CHECK(ReadJson(run.run_dir / "stages/01-l/outputs.json")["iterations"] == 2);
}

TEST_CASE("expression errors at run time name the location", "[pipeline][executor]") {
  PipelineFixture f;
  auto run = f.Run("version: 1\nname: t\nstages:\n  - {id: r, uses: native:test_return}\n  - id: a\n    uses: native:test_echo\n"
                   "    with: {value: '${{ stages.r.outputs.nothing.here }}'}\n");
  CHECK(run.result.status == "failed");
  std::string message = run.result.stages["a"]["error"]["message"];
  CHECK(run.result.stages["a"]["error"]["kind"] == "expression_error");
  CHECK_THAT(message, Catch::Contains("pipeline.yaml:7:19"));
  CHECK_THAT(message, Catch::Contains("nothing.here"));
}
