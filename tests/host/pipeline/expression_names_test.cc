// The global names an expression reads, found without running it.
#include <catch2/catch.hpp>

#include "pipeline/expression_names.h"

using namespace accelopt;

namespace {

std::vector<std::string> Names(const std::string& code) {
  std::vector<std::string> names;
  auto uses = GlobalNames(code);
  for (const auto& use : uses.value()) names.push_back(use.name);
  return names;
}

}  // namespace

TEST_CASE("global names: fields, methods, keys, strings and comments are skipped", "[pipeline][names]") {
  CHECK(Names("vars.n * 2 + 1") == std::vector<std::string>{"vars"});
  CHECK(Names("vars.name:upper() .. 'stages.x' .. [[iter]]") == std::vector<std::string>{"vars"});
  CHECK(Names("{a = carry.x, b = 1}") == std::vector<std::string>{"carry"});
  CHECK(Names("not x and y == nil or z ~= true") == std::vector<std::string>{"x", "y", "z"});
  CHECK(Names("len(stages.load.outputs.cases) -- vars\n + 1e-3") == std::vector<std::string>{"len", "stages"});
  CHECK(Names("0x1p4 + .5 + 3e+2").empty());
}

TEST_CASE("global names carry their field chain and offset", "[pipeline][names]") {
  auto uses = GlobalNames("1 + stages.load.outputs.cases[1].x").value();
  REQUIRE(uses.size() == 1);
  CHECK(uses[0].fields == std::vector<std::string>{"load", "outputs", "cases"});
  CHECK(uses[0].offset == 4);
}

TEST_CASE("expressions that define functions are not analysed", "[pipeline][names]") {
  CHECK_FALSE(GlobalNames("(function(x) return x end)(1)"));
}
