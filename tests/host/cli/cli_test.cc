// End-to-end tests of the accelopt-host binary.
#include <catch2/catch.hpp>

#include <fstream>

#include "support/test_support.h"

using namespace accelopt::testing;

TEST_CASE("version and help flags work and exit 0", "[cli]") {
  auto version = RunHost({"--version"});
  CHECK(version.exit_code == 0);
  CHECK_THAT(version.output, Catch::Contains("accelopt-host 0."));
  for (const char* command : {"run", "validate", "stages", "profile"}) {
    auto help = RunHost({command, "--help"});
    INFO(command);
    CHECK(help.exit_code == 0);
    CHECK_THAT(help.output, Catch::Contains("Usage"));
  }
}

TEST_CASE("usage errors exit 2", "[cli]") {
  CHECK(RunHost({}).exit_code == 2);
  CHECK(RunHost({"frobnicate"}).exit_code == 2);
  CHECK(RunHost({"run"}).exit_code == 2);
  CHECK(RunHost({"run", "/nonexistent.yaml"}).exit_code == 2);
}

TEST_CASE("validate reports pipeline errors as file:line:col and exits 2", "[cli]") {
  TempDir dir;
  auto file = dir.Write("bad.yaml", "version: 1\nname: bad\nstages:\n  - id: a\n    uses: native:profil\n");
  auto result = RunHost({"validate", file.string()});
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.output, Catch::Contains(file.string() + ":5:11: error: unknown stage 'native:profil' (did you mean 'profile'?)"));
  auto ok = RunHost({"validate", SourcePath("pipelines/nkibench-profile.yaml").string()});
  CHECK(ok.exit_code == 0);
}

TEST_CASE("stages lists native and Lua stages with their parameters", "[cli]") {
  auto result = RunHost({"stages"});
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("native:profile"));
  CHECK_THAT(result.output, Catch::Contains("native:nkibench_load"));
  CHECK_THAT(result.output, Catch::Contains("select_cases.lua"));
  CHECK_THAT(result.output, Catch::Contains("rel_tol"));
}

TEST_CASE("the main pipeline profiles the small NKIBench cases end to end", "[cli][e2e]") {
  TempDir dir;
  auto run_dir = dir.path() / "run";
  auto result = RunHost({"run", SourcePath("pipelines/nkibench-profile.yaml").string(), "--set", "vars.cases=small",
                         "--set", "backend.nki=emulator", "--run-dir", run_dir.string()});
  INFO(result.output);
  CHECK(result.exit_code == 0);
  auto run = ReadJson(run_dir / "run.json");
  CHECK(run["status"] == "succeeded");
  CHECK(std::filesystem::exists(run_dir / "pipeline.resolved.yaml"));
  std::ifstream csv(run_dir / "profile_results.csv");
  std::string header;
  std::getline(csv, header);
  CHECK(header == "problem,values,case_id,task,kernel,case_name,service_name,profile");
  int rows = 0;
  for (std::string line; std::getline(csv, line);) ++rows;
  CHECK(rows >= 4);
  auto results = ReadJson(run_dir / "profile_results.json");
  for (const auto& row : results) {
    INFO(row.dump());
    CHECK(row["profile"]["correct"] == true);
    CHECK(row["profile"]["latency"].get<double>() > 0);
  }
  std::ifstream summary(run_dir / "summary.txt");
  std::string first;
  std::getline(summary, first);
  CHECK_THAT(first, Catch::Contains("correct"));
}

TEST_CASE("one bad kernel is reported and the others still finish", "[cli][e2e]") {
  TempDir dir;
  // A copy of our NKIBench with silu's small case pointing at a broken kernel.
  std::filesystem::copy(SourcePath("nkibench"), dir.path() / "bench", std::filesystem::copy_options::recursive);
  dir.Write("bench/kernels/broken.py", "this is not python\n");
  auto summary = ReadJson(dir.path() / "bench/summary.json");
  summary["silu"]["cases"]["small"]["impls"][0]["kernel"] = "./kernels/broken.py";
  std::ofstream(dir.path() / "bench/summary.json") << summary.dump(2);
  auto run_dir = dir.path() / "run";
  auto result = RunHost({"run", SourcePath("pipelines/nkibench-profile.yaml").string(), "--set", "vars.cases=small",
                         "--set", "vars.nkibench=" + (dir.path() / "bench").string(), "--run-dir", run_dir.string()});
  INFO(result.output);
  CHECK(result.exit_code == 1);
  auto results = ReadJson(run_dir / "profile_results.json");
  int correct = 0, compile_errors = 0;
  for (const auto& row : results) {
    if (row["profile"]["correct"] == true) ++correct;
    if (row["profile"].contains("error") && row["profile"]["error"]["kind"] == "compile_error") ++compile_errors;
  }
  CHECK(compile_errors == 1);
  CHECK(correct == static_cast<int>(results.size()) - 1);
}
