// The Trainium path end to end, against the stand-in SDK, neuron-profile and
// neuron-ls of tests/fixtures/neuron_sdk (tests/fixtures/README.md), through
// the default worker isolation.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "support/test_support.h"

using namespace accelopt::testing;
using json = nlohmann::json;

namespace {

const std::string kSdk = SourcePath("tests/fixtures/neuron_sdk").string();
const std::string kSdk228 = SourcePath("tests/fixtures/neuron_sdk_228").string();
const std::string kKernel = SourcePath("nkibench/kernels/silu_0.py").string();
const std::string kReference = SourcePath("nkibench/reference/silu_M256_N1024_numpy.py").string();

// PATH with the stand-in tools first; more NAME=value entries may follow.
std::vector<std::string> StandInEnv(std::vector<std::string> more = {}) {
  const char* path = std::getenv("PATH");
  more.insert(more.begin(), "PATH=" + kSdk + "/bin:" + (path ? path : "/usr/bin:/bin"));
  return more;
}

json ProfileJson(const std::vector<std::string>& env, std::vector<std::string> extra) {
  std::vector<std::string> args = {"profile", kKernel, "--reference", kReference, "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto result = RunHostWithEnv(env, args);
  INFO(result.output);
  auto start = result.output.find("{\n");
  REQUIRE(start != std::string::npos);
  return json::parse(result.output.substr(start));
}

double EmulatorEstimateMs() {
  json emulated = ProfileJson({}, {"--backend", "emulator"});
  REQUIRE(emulated["estimated"] == true);
  return emulated["latency_ms"].get<double>();
}

}  // namespace

TEST_CASE("profile --backend neuron returns the stand-in device's latency through a worker", "[cli][trainium]") {
  json result = ProfileJson(StandInEnv(), {"--backend", "neuron", "--neuron-cores", "4-5", "--python-path", kSdk});
  INFO(result.dump(2));
  CHECK(result["correct"] == true);
  CHECK(result["error"].is_null());
  CHECK(result["backend"] == "neuron");
  CHECK(result["estimated"] == false);
  CHECK(result["sdk_version"] == "2.21.0+standin");
  CHECK_THAT(result["backend_reason"].get<std::string>(), Catch::Contains("neuronxcc.nki 2.21.0+standin"));
  // The stand-in device runs 1.5x the emulator's estimate + 2 us: a measurement, not the estimate.
  double expected = 1.5 * EmulatorEstimateMs() + 0.002;
  CHECK(std::abs(result["latency_ms"].get<double>() - expected) < 1e-6 * expected + 1e-9);
  CHECK(result["metrics"]["rounds"] == 1);
  CHECK(result["metrics"]["samples_ms"].size() == 10);  // AccelOpt's 10 timed runs, profiled by the host
  CHECK(result["metrics"]["rel_diffs"] == 0.0);
  CHECK(result["metrics"].contains("hbm_read_bytes"));
}

TEST_CASE("auto picks the SDK when --python-path makes it importable; SDK 2.28's nki namespace serves trn2",
          "[cli][trainium]") {
  json automatic = ProfileJson(StandInEnv(), {"--backend", "auto", "--neuron-cores", "0", "--python-path", kSdk});
  CHECK(automatic["backend"] == "neuron");
  CHECK(automatic["correct"] == true);
  json without = ProfileJson({}, {"--backend", "auto"});
  CHECK(without["backend"] == "emulator");
  CHECK_THAT(without["backend_reason"].get<std::string>(), Catch::Contains("no Neuron SDK"));

  json old_sdk = ProfileJson(StandInEnv(), {"--backend", "neuron", "--target", "trn2", "--neuron-cores", "0",
                                            "--python-path", kSdk});
  // trn2 asked of a trn1 instance: compiled for trn2 (both namespaces are told the platform),
  // and the runtime refuses the NEFF; never a result measured on the wrong generation.
  CHECK(old_sdk["correct"] == false);
  CHECK_THAT(old_sdk["error"]["message"].get<std::string>(), Catch::Contains("targets trn2"));
  json new_sdk = ProfileJson(StandInEnv({"NEURON_STANDIN_INSTANCE_TYPE=trn2.48xlarge"}),
                             {"--backend", "neuron", "--target", "trn2", "--neuron-cores", "0",
                              "--python-path", kSdk228, "--python-path", kSdk});
  INFO(new_sdk.dump(2));
  CHECK(new_sdk["correct"] == true);
  CHECK(new_sdk["sdk_version"] == "2.28.0+standin");
  CHECK(new_sdk["target"] == "trn2");
}

TEST_CASE("hardware timing failures: profiler exit status, profiler timeout, unsteady rounds", "[cli][trainium]") {
  std::vector<std::string> args = {"--backend", "neuron", "--neuron-cores", "0", "--python-path", kSdk};
  json failed = ProfileJson(StandInEnv({"STANDIN_PROFILE_FAIL=1"}), args);
  CHECK(failed["correct"] == true);  // the kernel is right; only its timing failed
  CHECK(failed["error"]["kind"] == "timing_error");
  CHECK_THAT(failed["error"]["message"].get<std::string>(), Catch::Contains("neuron-profile capture failed (2)"));
  CHECK(failed["latency_ms"].is_null());

  json slow = ProfileJson(StandInEnv({"STANDIN_PROFILE_SLEEP=3", "ACCELOPT_NEURON_PROFILE_TIMEOUT_S=0.5"}), args);
  CHECK(slow["error"]["kind"] == "timing_error");
  CHECK_THAT(slow["error"]["message"].get<std::string>(), Catch::Contains("ran past 0.5 s"));

  // Every other run 5 % slower: (max-min)/min > 1 %, so the round is measured
  // again twice (AccelOpt's protocol) and the steadiest round is kept.
  // (AccelOpt's own protocol, ACCELOPT_NEURON_TIMING=baremetal: the worker compiles each round again)
  json unsteady = ProfileJson(StandInEnv({"STANDIN_PROFILE_JITTER=0.05", "ACCELOPT_NEURON_TIMING=baremetal"}), args);
  INFO(unsteady.dump(2));
  CHECK(unsteady["correct"] == true);
  CHECK(unsteady["metrics"]["rounds"] == 3);
  CHECK(std::abs(unsteady["metrics"]["rel_diffs"].get<double>() - 0.05) < 1e-9);
}

TEST_CASE("no NeuronCore found is a clear error naming --neuron-cores", "[cli][trainium]") {
  json result = ProfileJson({"PATH=/usr/bin:/bin", "ACCELOPT_NEURON_ROOT=/nonexistent"},
                            {"--backend", "neuron", "--python-path", kSdk});
  CHECK(result["correct"] == false);
  CHECK(result["error"]["kind"] == "config_error");
  CHECK_THAT(result["error"]["message"].get<std::string>(), Catch::Contains("--neuron-cores"));
}

TEST_CASE("the profile pipeline runs on the neuron backend with one worker per NeuronCore from neuron-ls",
          "[cli][trainium][e2e]") {
  TempDir dir;
  auto run_dir = dir.path() / "run";
  auto result = RunHostWithEnv(StandInEnv({"STANDIN_NEURON_DEVICES=1", "ACCELOPT_NO_PROGRESS=1"}),
                               {"run", SourcePath("pipelines/nkibench-profile.yaml").string(), "--set",
                                "backend.nki=neuron", "--set", "vars.cases=small", "--set",
                                "vars.problems=[silu, mamba]", "--python-path", kSdk, "--run-dir", run_dir.string()});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  json run = ReadJson(run_dir / "run.json");
  CHECK(run["backend"]["backend"] == "neuron");
  CHECK(run["backend"]["sdk_version"] == "2.21.0+standin");
  CHECK(run["services"]["workers"]["backend"] == "neuron");
  CHECK(run["services"]["workers"]["neuron_cores"] == json::array({0, 1}));  // 1 device x 2 cores
  CHECK(run["services"]["workers"]["workers"] == 2);
  json results = ReadJson(run_dir / "profile_results.json");
  REQUIRE(results.size() == 2);
  for (const auto& entry : results) {
    CHECK(entry["profile"]["correct"] == true);
    CHECK(entry["profile"]["estimated"] == false);
    CHECK(entry["profile"]["rounds"] == 1);
    if (entry["case"]["problem"] == "mamba") CHECK(entry["case"]["rel_tol"] == 3e-5);  // published, by default
  }
  std::ifstream summary(run_dir / "summary.txt");
  std::stringstream text;
  text << summary.rdbuf();
  CHECK_THAT(text.str(), Catch::Contains("backend: neuron (Neuron SDK 2.21.0+standin)"));
}
