// --set may only change what the pipeline declares (vars.*, backend.*).
#include <catch2/catch.hpp>

#include "pipeline/loader.h"
#include "support/test_support.h"

using namespace accelopt;
using accelopt::testing::TempDir;

namespace {

const char* kPipeline =
    "version: 1\nname: t\nvars:\n  cases: full\n  n: 1\nbackend:\n  target: trn1\nstages:\n  - id: a\n    uses: native:test_echo\n";

std::string SetError(const std::vector<std::string>& sets) {
  TempDir dir;
  auto file = dir.Write("p.yaml", kPipeline);
  try {
    LoadPipeline(file, sets);
    return "";
  } catch (const ConfigError& error) {
    std::string text = error.what();
    for (size_t pos; (pos = text.find(file.string())) != std::string::npos;) text.replace(pos, file.string().size(), "p.yaml");
    return text;
  }
}

}  // namespace

TEST_CASE("set: an undeclared variable is an error with did-you-mean", "[pipeline][set]") {
  CHECK(SetError({"vars.case=small"}) ==
        "p.yaml:4:3: error: --set vars.case=small: the pipeline has no variable 'case' (did you mean 'cases'?) "
        "(vars: declares cases, n)");
  CHECK_THAT(SetError({"backend.targt=trn2"}), Catch::Contains("the pipeline has no backend setting 'targt' (did you mean 'target'?)"));
}

TEST_CASE("set: declared names can still be set", "[pipeline][set]") {
  CHECK(SetError({"vars.cases=small", "vars.n=3", "backend.target=trn2", "name=other"}).empty());
  TempDir dir;
  auto pipeline = LoadPipeline(dir.Write("p.yaml", kPipeline), {"vars.n=3"});
  CHECK(pipeline.vars["n"] == 3);
}
