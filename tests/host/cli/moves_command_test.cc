// `accelopt-host moves KERNEL.py` (host/src/cli/moves_command.cc): the rule moves that apply to a
// kernel, through the binary; with --reference the kernel is profiled first (sandboxed worker).
#include <catch2/catch.hpp>

#include "support/test_support.h"

using namespace accelopt::testing;
using nlohmann::json;

namespace {

const std::string kSilu = SourcePath("nkibench/kernels/silu_0.py").string();
const std::string kSiluRef = SourcePath("nkibench/reference/silu_M256_N1024_numpy.py").string();

}  // namespace

TEST_CASE("moves lists the applicable rule moves with their documented effect", "[cli][moves]") {
  auto result = RunHost({"moves", kSilu});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("no profile: ranked by the rules' priors"));
  CHECK_THAT(result.output, Catch::Contains("fuse_silu:y_tile"));
  CHECK_THAT(result.output, Catch::Contains("effect: VectorE/ScalarE time"));
  CHECK_THAT(result.output, Catch::Contains("nki-facts §3.3"));

  auto listed = RunHost({"moves", kSilu, "--json", "--max", "3"});
  REQUIRE(listed.exit_code == 0);
  json out = json::parse(listed.output.substr(listed.output.find('{')));
  CHECK(out["profile"].is_null());
  REQUIRE(out["plans"].size() == 3);
  for (const auto& plan : out["plans"]) {
    CHECK(plan.contains("effect"));
    CHECK_FALSE(plan.contains("predicted_gain"));  // nothing to predict from without a profile
  }
}

TEST_CASE("moves --reference ranks by the profiled metrics with a predicted gain", "[cli][moves]") {
  auto result = RunHost({"moves", kSilu, "--reference", kSiluRef, "--json"});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  json out = json::parse(result.output.substr(result.output.find('{')));
  REQUIRE(out["profile"]["correct"] == true);
  REQUIRE_FALSE(out["plans"].empty());
  for (const auto& plan : out["plans"]) {
    REQUIRE(plan["predicted_gain"].is_number());
    CHECK(plan["predicted_gain"].get<double>() >= 0.0);
  }
  // the listing is sorted by the predicted gain: the silu fusion first on this VectorE-heavy kernel
  CHECK(out["plans"][0]["rule"] == "fuse_silu");
}

TEST_CASE("moves --reference offers only what the reference's shapes allow, in the order of its gain column",
          "[cli][moves]") {
  auto result = RunHost({"moves", kSilu, "--reference", kSiluRef, "--json", "--max", "40"});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  json out = json::parse(result.output.substr(result.output.find('{')));
  REQUIRE(out["profile"]["input_shapes"] == json::array({json::array({256, 1024})}));
  double previous = 1.0;
  for (const auto& plan : out["plans"]) {
    CHECK(plan["id"] != "tunable:TILE_N=2048");  // N = 1024: fails the kernel's N % TILE_N assert
    const double gain = plan["predicted_gain"].get<double>();
    CHECK(gain <= previous);  // rank order and predicted gain agree
    previous = gain;
    if (plan["rule"] == "tunable" && plan["params"]["value"] < plan["params"]["old"])
      CHECK_THAT(plan["effect"].get<std::string>(), !Catch::Contains("fewer, larger"));
  }
  auto text = RunHost({"moves", kSilu, "--reference", kSiluRef});
  CHECK_THAT(text.output, Catch::Contains("ranked by the predicted gain") && !Catch::Contains("TILE_N=2048"));
}

TEST_CASE("moves refuses unreadable or unparsable kernels", "[cli][moves]") {
  TempDir dir;
  auto bad = dir.Write("bad.py", "def kernel(:\n");
  auto result = RunHost({"moves", bad.string()});
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.output, Catch::Contains("source does not parse"));
  CHECK(RunHost({"moves", (dir.path() / "missing.py").string()}).exit_code == 2);
}
