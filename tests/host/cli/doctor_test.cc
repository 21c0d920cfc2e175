// `accelopt-host doctor` against the stand-in SDK 2.28 layout and tools of tests/fixtures (issue 39).
#include <catch2/catch.hpp>

#include <cstdlib>

#include "support/test_support.h"

using namespace accelopt::testing;
using json = nlohmann::json;

namespace {

const std::string kSdk = SourcePath("tests/fixtures/neuron_sdk").string();
const std::string kSdk228 = SourcePath("tests/fixtures/neuron_sdk_228").string();

std::string StandInPath() {
  const char* path = std::getenv("PATH");
  return "PATH=" + kSdk + "/bin:" + (path ? path : "/usr/bin:/bin");
}

}  // namespace

TEST_CASE("doctor prints the SDK, both namespaces, free cores, the trn2 target and LNC, and its plan",
          "[cli][trainium][doctor]") {
  auto result = RunHostWithEnv({StandInPath(), "NEURON_STANDIN_INSTANCE_TYPE=trn2.48xlarge",
                                "NEURON_STANDIN_PROCESSES=1:4242:python train.py"},
                               {"doctor", "--python-path", kSdk228, "--python-path", kSdk});
  INFO(result.output);
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("nki: 2.28.0+standin"));
  CHECK_THAT(result.output, Catch::Contains("neuronxcc.nki: 2.21.0+standin"));
  CHECK_THAT(result.output, Catch::Contains("[0, 1, 2, 3, 4, 5, 6, 7]"));  // device 1 is held
  CHECK_THAT(result.output, Catch::Contains("pid 4242 python train.py"));
  CHECK_THAT(result.output, Catch::Contains("instance trn2.48xlarge"));
  CHECK_THAT(result.output, Catch::Contains("target      trn2"));
  CHECK_THAT(result.output, Catch::Contains("--logical-nc-config=1"));
  CHECK_THAT(result.output, Catch::Contains("NEURON_LOGICAL_NC_CONFIG=1"));
  CHECK_THAT(result.output, Catch::Contains("problems:   none found"));

  auto as_json = RunHostWithEnv({StandInPath()}, {"doctor", "--json", "--python-path", kSdk, "--target", "trn1"});
  INFO(as_json.output);
  json report = json::parse(as_json.output.substr(as_json.output.find("{\n")));
  CHECK(report["target"] == "trn1");
  CHECK(report["sdk"]["namespace"] == "neuronxcc.nki");
  CHECK(report["cores"]["cores"].size() == 4);  // 2 trn1 devices of 2 cores
}

TEST_CASE("doctor without an SDK or neuron-ls names each problem and exits 1", "[cli][trainium][doctor]") {
  auto result = RunHostWithEnv({"PATH=/usr/bin:/bin", "ACCELOPT_NEURON_ROOT=/nonexistent"}, {"doctor"});
  INFO(result.output);
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.output, Catch::Contains("neuron-ls not found"));
  CHECK_THAT(result.output, Catch::Contains("no Neuron SDK importable"));
  CHECK_THAT(result.output, Catch::Contains("NKI emulator"));
}
