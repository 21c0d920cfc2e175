// Screen-then-confirm through a whole search (pipelines/nkibench-agent.yaml,
// sandboxed workers, emulator) on the clip fixture (tests/fixtures/screen_confirm):
// a scripted LLM proposes the kernel that drops the clip - faster than the
// baseline, right on seed 0 and on every hidden set, wrong on seed 21. It passes
// the screen, beats the best, is confirmed, fails the confirmation, and is
// recorded as a failed candidate; the best stays the baseline.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<json> Lines(const fs::path& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

// An NKIBench-format directory with the one clip problem.
fs::path ClipBench(const fs::path& dir) {
  const fs::path fixture = SourcePath("tests/fixtures/screen_confirm");
  fs::create_directories(dir / "reference");
  fs::create_directories(dir / "kernels");
  fs::copy_file(fixture / "reference" / "clip_M256_N512_numpy.py", dir / "reference" / "clip_M256_N512_numpy.py");
  fs::copy_file(fixture / "kernels" / "clip_0.py", dir / "kernels" / "clip_0.py");
  json summary = {{"clip", {{"cases", {{"small", {{"values", {{"M", 256}, {"N", 512}}},
                                                  {"impls", {{{"task", "./reference/clip_M256_N512_numpy.py"},
                                                              {"kernel", "./kernels/clip_0.py"}}}}}}}}}}};
  std::ofstream(dir / "summary.json") << summary.dump(2);
  return dir;
}

}  // namespace

TEST_CASE("a candidate that passes the screen but fails its confirmation is a failed candidate, never the best",
          "[search][agent][e2e][screen]") {
  const std::string noclip = Slurp(SourcePath("tests/fixtures/screen_confirm/kernels/clip_noclip.py"));
  ScriptedLlmServer server([&](const json& body) -> std::string {
    const std::string system = body["messages"][0]["content"];
    if (system.rfind("You are a performance engineer", 0) == 0) return "PLAN: drop the clip\nThe inputs never exceed 8.";
    if (system.rfind("You are an NKI kernel engineer", 0) == 0) return Fenced(noclip);
    return "TITLE: no clip\nDESCRIPTION:\nDropped the clip.\n";
  });
  TempDir dir;
  const auto bench = ClipBench(dir.path() / "bench");
  const auto run_dir = dir.path() / "run";
  std::vector<std::string> args = {"run", SourcePath("pipelines/nkibench-agent.yaml").string(), "--run-dir", run_dir.string()};
  for (const std::string& s : std::vector<std::string>{"vars.nkibench=" + bench.string(), "vars.cases=small", "backend.nki=emulator",
                                                       "vars.mode=llm", "vars.budget=1", "vars.plans=1", "vars.llm_concurrency=1",
                                                       "llm.default.model=fake-model", "llm.default.base_url=" + server.BaseUrl()}) {
    args.push_back("--set");
    args.push_back(s);
  }
  auto result = RunHost(args);
  INFO(result.output);
  REQUIRE(ReadJson(run_dir / "run.json")["status"] == "succeeded");

  // The candidate's record: failed with the confirmation's error; the screen ran the hidden set alone
  // (screen_hidden_only), so no published seed was validated.
  const auto records = Lines(run_dir / "optimize" / "records.jsonl");
  REQUIRE(records.size() == 1);
  INFO(records[0].dump(2));
  CHECK(records[0]["status"] == "failed");
  CHECK(records[0]["validation"] == "screened");
  CHECK(records[0]["validated_seeds"] == json::array());
  CHECK(records[0]["confirm"]["correct"] == false);
  CHECK(records[0]["screened_latency_ms"].get<double>() < records[0]["baseline_latency_ms"].get<double>());
  CHECK(records[0]["error"]["kind"] == "wrong_result");
  CHECK_THAT(records[0]["error"]["message"].get<std::string>(), Catch::Contains("confirmation on seeds [0, 21, 42, 63, 84] failed"));

  const auto experiments = Lines(run_dir / "experiments.jsonl");
  REQUIRE(experiments.size() == 1);
  CHECK(experiments[0]["status"] == "correctness_fail");

  // The report keeps the baseline: no improvement, no best kernel file.
  const json report = ReadJson(run_dir / "optimize_results.json");
  REQUIRE(report["rows"].size() == 1);
  CHECK(report["rows"][0]["status"] == "no_improvement");
  CHECK(report["rows"][0]["winner"]["validation"] == "full");
  CHECK_FALSE(fs::exists(run_dir / "best" / "clip_M256_N512.py"));

  // With screening off the same candidate fails on seed 21 in its one call.
  const auto full_dir = dir.path() / "full";
  args[3] = full_dir.string();
  args.push_back("--set");
  args.push_back("vars.screen_seeds=0");
  auto full = RunHost(args);
  INFO(full.output);
  REQUIRE(ReadJson(full_dir / "run.json")["status"] == "succeeded");
  const auto full_records = Lines(full_dir / "optimize" / "records.jsonl");
  REQUIRE(full_records.size() == 1);
  CHECK(full_records[0]["validation"] == "full");
  CHECK(full_records[0]["status"] == "failed");
  CHECK_FALSE(full_records[0].contains("confirm"));
}
