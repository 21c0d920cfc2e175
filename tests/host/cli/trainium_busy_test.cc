// A NeuronCore another process holds (issue 39 item 4), against the stand-in runtime of
// tests/fixtures/neuron_sdk (NEURON_STANDIN_BUSY_CORES: the runtime answers with the documented
// "NeuronCore(s) not available" line).
#include <catch2/catch.hpp>

#include <cstdlib>

#include "support/test_support.h"

using namespace accelopt::testing;
using json = nlohmann::json;

namespace {

const std::string kSdk = SourcePath("tests/fixtures/neuron_sdk").string();

std::string StandInPath() {
  const char* path = std::getenv("PATH");
  return "PATH=" + kSdk + "/bin:" + (path ? path : "/usr/bin:/bin");
}

}  // namespace

TEST_CASE("a NeuronCore held by another process is the environment's error, and a run retries on another core",
          "[cli][trainium]") {
  // One core, held: reported as device_unavailable, never as a wrong kernel.
  auto single = RunHostWithEnv({StandInPath(), "NEURON_STANDIN_BUSY_CORES=0"},
                               {"profile", SourcePath("nkibench/kernels/silu_0.py").string(), "--reference",
                                SourcePath("nkibench/reference/silu_M256_N1024_numpy.py").string(), "--json",
                                "--backend", "neuron", "--neuron-cores", "0", "--python-path", kSdk});
  INFO(single.output);
  json result = json::parse(single.output.substr(single.output.find("{\n")));
  CHECK(result["error"]["kind"] == "device_unavailable");
  CHECK_THAT(result["error"]["message"].get<std::string>(), Catch::Contains("NeuronCore(s) not available"));

  // Two workers, core 0 held: every kernel runs on core 1 and is correct.
  TempDir dir;
  auto run_dir = dir.path() / "run";
  auto run = RunHostWithEnv({StandInPath(), "STANDIN_NEURON_DEVICES=1", "NEURON_STANDIN_BUSY_CORES=0",
                             "ACCELOPT_NO_PROGRESS=1"},
                            {"run", SourcePath("pipelines/nkibench-profile.yaml").string(), "--set",
                             "backend.nki=neuron", "--set", "vars.cases=small", "--set", "vars.problems=[silu, mamba]",
                             "--python-path", kSdk, "--run-dir", run_dir.string()});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.output, Catch::Contains("NeuronCore 0 is held by another process; retrying on another core"));
  json results = ReadJson(run_dir / "profile_results.json");
  REQUIRE(results.size() == 2);
  for (const auto& entry : results) CHECK(entry["profile"]["correct"] == true);
}
