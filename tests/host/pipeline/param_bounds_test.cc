// Parameter schemas' minimum/maximum, path and keys_of (pipeline/param_check.h):
// what `validate` uses to refuse budget=-3, a missing benchmark folder and an
// unknown problem name before anything runs (issue 36, item 7).
#include <catch2/catch.hpp>

#include "pipeline/param_check.h"
#include "support/test_support.h"

using namespace accelopt;
using nlohmann::json;

TEST_CASE("minimum and maximum bound numbers", "[pipeline][params]") {
  const json spec = json::parse(R"({"type": "integer", "minimum": 0, "maximum": 64})");
  CHECK_FALSE(CheckParamValue(0, spec));
  CHECK(CheckParamValue(-3, spec) == std::optional<std::string>("must be >= 0, got -3"));
  CHECK(CheckParamValue(65, spec) == std::optional<std::string>("must be <= 64, got 65"));
  CHECK(CheckSchema(json::parse(R"({"a": {"type": "integer", "minimum": "zero"}})"), "params") ==
        std::vector<std::string>{"params.a.minimum: must be a number"});
}

TEST_CASE("path: a value names an existing directory or file", "[pipeline][params]") {
  accelopt::testing::TempDir dir;
  auto file = dir.Write("f.txt", "x");
  const json as_dir = json::parse(R"({"type": "string", "path": "dir"})");
  CHECK_FALSE(CheckParamValue(dir.path().string(), as_dir));
  CHECK_THAT(*CheckParamValue((dir.path() / "nope").string(), as_dir),
             Catch::Contains("must name an existing directory") && Catch::Contains("(no such directory)"));
  CHECK_THAT(*CheckParamValue(file.string(), as_dir), Catch::Contains("(not a directory)"));
  CHECK_FALSE(CheckParamValue(file.string(), json::parse(R"({"type": "string", "path": "file"})")));
  CHECK(CheckSchema(json::parse(R"({"a": {"path": "folder"}})"), "params") ==
        std::vector<std::string>{"params.a.path: must be \"dir\" or \"file\""});
}

TEST_CASE("keys_of: names must be keys of a JSON file in the folder another parameter names", "[pipeline][params]") {
  accelopt::testing::TempDir dir;
  dir.Write("summary.json", R"({"silu": {}, "adamw": {}})");
  const json spec = json::parse(R"({"type": "array", "keys_of": {"param": "dir", "file": "summary.json"}})");
  const json with = {{"dir", dir.path().string()}};
  CHECK_FALSE(CheckParamKeys(json::array({"silu", "adamw"}), spec, with));
  auto problem = CheckParamKeys(json::array({"silu", "slu"}), spec, with);
  REQUIRE(problem);
  CHECK_THAT(*problem, Catch::Contains("names 'slu'") && Catch::Contains("did you mean 'silu'") &&
                           Catch::Contains("it has: adamw, silu"));
  // Unknown until the folder is: nothing to say (the path check speaks for the folder).
  CHECK_FALSE(CheckParamKeys(json::array({"x"}), spec, json{{"dir", (dir.path() / "nope").string()}}));
  CHECK_FALSE(CheckParamKeys(json::array({"x"}), spec, json::object()));
}
