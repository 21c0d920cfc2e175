// docs/plugins.md's one build line for an out-of-tree plugin works: it builds
// the SDK's worked example outside the tree, and the host loads it from
// ACCELOPT_PLUGIN_PATH (issue 36, item 10).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <regex>

#include "support/test_support.h"

using namespace accelopt::testing;

TEST_CASE("the documented out-of-tree build line builds a plugin the host loads", "[plugin][docs]") {
  std::ifstream in(SourcePath("docs/plugins.md"));
  std::string line, build;
  while (std::getline(in, line))
    if (line.rfind("g++ ", 0) == 0) build = line;
  REQUIRE_FALSE(build.empty());
  TempDir dir;
  // The doc's names: ACCELOPT (this repository), my_stage.cc / my_stage.so (the user's files).
  std::filesystem::copy_file(SourcePath("tests/plugins/example_greet.cc"), dir.path() / "my_stage.cc");
  const std::string command = "cd '" + dir.path().string() + "' && ACCELOPT='" + SourcePath("").string() + "' && " + build + " 2>&1";
  INFO(command);
  REQUIRE(std::system(command.c_str()) == 0);
  REQUIRE(std::filesystem::exists(dir.path() / "my_stage.so"));
  auto listed = RunHostWithEnv({"ACCELOPT_PLUGIN_PATH=" + dir.path().string()}, {"stages"});
  INFO(listed.output);
  CHECK(listed.exit_code == 0);
  CHECK_THAT(listed.output, Catch::Contains("native:example_greet"));
}
