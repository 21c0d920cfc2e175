// The fixture's flashinfer-profile run with the PyPI environment (ACCELOPT_VENV,
// scripts/setup_pypi.sh: torch 2.9 carrying its own pybind11 3.0) completes
// with the right statuses and runs on that torch. Before host/src/python/gil.h
// it died with SIGSEGV in the evaluate stage (issue 38). Checks only where the
// environment exists (./.venv, built by SETUP_PYPI=1 scripts/setup.sh).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/test_support.h"

namespace fs = std::filesystem;
using namespace accelopt::testing;
using nlohmann::json;

TEST_CASE("flashinfer-profile with the PyPI environment: the fixture's statuses, on the venv's torch",
          "[flashinfer][e2e][pypi]") {
  const fs::path venv = SourcePath(".venv");
  if (!fs::exists(venv / "lib/python3.11/site-packages/torch/__init__.py")) {
    WARN("skipped: no PyPI environment at " + venv.string() + " (SETUP_PYPI=1 scripts/setup.sh builds it)");
    return;
  }
  TempDir dir;
  const fs::path run = dir.path() / "run";
  auto result = RunHostWithEnv({"ACCELOPT_VENV=" + venv.string()},
                               {"run", SourcePath("pipelines/flashinfer-profile.yaml").string(), "--run-dir", run.string(),
                                "--set", "vars.trace_set=" + SourcePath("tests/fixtures/flashinfer").string()});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  json summary = ReadJson(run / "summary.json");
  CHECK(summary["statuses"]["PASSED"] == 3);
  CHECK(summary["statuses"]["INCORRECT_NUMERICAL"] == 3);
  // Every trace names the torch it ran on: the venv's 2.x, not Debian's 1.13.
  std::ifstream in(run / "traces/fixture_author/rmsnorm/rmsnorm_h16.jsonl");
  int traces = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json trace = json::parse(line);
    INFO(line);
    CHECK(trace["evaluation"]["environment"]["libs"]["torch"].get<std::string>().rfind("2.", 0) == 0);
    ++traces;
  }
  CHECK(traces == 6);
}
