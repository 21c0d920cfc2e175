// Hostile expressions, edited outputs and planted symlinks are contained with
// a clear error while honest stages around them finish.
#include <fstream>

#include "core/journal.h"
#include "host/pipeline/pipeline_fixture.h"

using namespace accelopt;
using accelopt::testing::PipelineFixture;
using accelopt::testing::ReadJson;
using nlohmann::json;
namespace fs = std::filesystem;

TEST_CASE("hostile expressions in with: run inside the stage's timeout and memory cap", "[pipeline][hardening]") {
  PipelineFixture f;
  auto run = f.Run(
      "version: 1\nname: t\nstages:\n"
      "  - id: spin\n    uses: native:test_echo\n    timeout: 300ms\n    on_failure: continue\n"
      "    with: {value: \"${{ (function() while #run.dir > 0 do end end)() }}\"}\n"
      "  - id: rep\n    uses: native:test_echo\n    on_failure: continue\n"
      "    with: {value: \"${{ (function() local s = run.dir while true do s = s .. s end end)() }}\"}\n"
      "  - id: honest\n    uses: native:test_echo\n    with: {value: \"${{ 6 * 7 }}\"}\n");
  json stages = run.result.stages;
  CHECK(stages["spin"]["status"] == "failed");
  CHECK(stages["spin"]["error"]["kind"] == "timeout");  // the stage's clock covers resolving `with`
  CHECK_THAT(stages["spin"]["error"]["message"].get<std::string>(),
             Catch::Contains("pipeline.yaml:8:") && Catch::Contains("stage exceeded its timeout of 300 ms in ${{"));
  CHECK(stages["rep"]["status"] == "failed");
  CHECK(stages["rep"]["error"]["kind"] == "expression_error");
  CHECK_THAT(stages["rep"]["error"]["message"].get<std::string>(), Catch::Contains("out of memory"));
  CHECK(stages["honest"]["status"] == "ok");
  CHECK(ReadJson(run.run_dir / "stages/03-honest/outputs.json")["value"] == 42);
}

TEST_CASE("a symlink planted in a stage folder fails that item only", "[pipeline][hardening]") {
  PipelineFixture f;
  testing::TempDir outside;
  auto victim = outside.Write("victim.txt", "precious");
  Pipeline pipeline = f.Load(
      "version: 1\nname: t\nstages:\n"
      "  - id: fan\n    for_each: '${{ {1, 2, 3} }}'\n    on_failure: continue\n    uses: native:test_echo\n"
      "    with: {value: '${{ item }}'}\n");
  auto stages = ValidatePipeline(pipeline, f.registry());
  RunDirectory run_dir = RunDirectory::Create(f.dir().path() / "run", pipeline.name);
  fs::create_directories(run_dir.path() / "stages/01-fan");
  fs::create_directory_symlink(outside.path(), run_dir.path() / "stages/01-fan/item-0001");
  Progress progress(false);
  Executor executor(pipeline, stages, run_dir, progress);
  RunResult result = executor.Run();
  json outputs = ReadJson(run_dir.path() / "stages/01-fan/outputs.json");
  CHECK(outputs[0]["value"] == 1);
  CHECK(outputs[1]["ok"] == false);
  CHECK_THAT(outputs[1]["error"]["message"].get<std::string>(), Catch::Contains("refusing a symlink"));
  CHECK(outputs[2]["value"] == 3);
  CHECK(result.failed_items == 1);
  std::ifstream in(victim);
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "precious");
  CHECK(std::distance(fs::directory_iterator(outside.path()), fs::directory_iterator()) == 1);
}

TEST_CASE("resume re-runs an item whose outputs were edited after they were journaled", "[pipeline][hardening][resume]") {
  PipelineFixture f;
  Pipeline pipeline = f.Load(
      "version: 1\nname: t\nstages:\n"
      "  - id: fan\n    for_each: '${{ {1, 2, 3} }}'\n    uses: native:test_echo\n    with: {value: '${{ item * 10 }}'}\n"
      "  - id: total\n    uses: native:test_echo\n    with: {value: '${{ stages.fan.outputs }}'}\n");
  auto stages = ValidatePipeline(pipeline, f.registry());
  const fs::path dir = f.dir().path() / "run";
  auto run_once = [&](bool resume) {
    RunDirectory run_dir = RunDirectory::Create(dir, pipeline.name);
    Journal journal(run_dir.path() / "journal.jsonl");
    Progress progress(false);
    Executor executor(pipeline, stages, run_dir, progress);
    executor.SetResume(resume);
    executor.SetJournal(&journal);
    RunResult result = executor.Run();
    CHECK(result.ExitCode() == 0);
    return executor.reused();
  };
  CHECK(run_once(false) == 0);
  // Every finished item and stage journaled the hash of its outputs.json.
  auto hashes = Journal::OutputHashes(Journal::Read(dir / "journal.jsonl"));
  CHECK(hashes.count("stages/01-fan/item-0001") == 1);
  CHECK(hashes.count("stages/02-total") == 1);

  // Tamper with one item's outputs after the fact.
  std::ofstream(dir / "stages/01-fan/item-0001/outputs.json") << "{\"value\": 999}\n";
  CHECK(run_once(true) == 3);  // items 0 and 2 and the unchanged total are reused; item 1 runs again
  CHECK(ReadJson(dir / "stages/01-fan/item-0001/outputs.json")["value"] == 20);
  json total = ReadJson(dir / "stages/02-total/outputs.json")["value"];
  REQUIRE(total.size() == 3);
  CHECK(total[0]["value"] == 10);
  CHECK(total[1]["value"] == 20);  // the re-run item, not the planted 999
  CHECK(total[2]["value"] == 30);

  // An untouched run resumes everything.
  CHECK(run_once(true) == 4);
}
