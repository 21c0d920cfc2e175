#include <catch2/catch.hpp>

#include "pipeline/loader.h"
#include "support/test_support.h"

using namespace accelopt;
using accelopt::testing::TempDir;

namespace {

// Loads `yaml`; returns the error text ("" if it loaded).
std::string LoadError(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  TempDir dir;
  auto file = dir.Write("p.yaml", yaml);
  try {
    LoadPipeline(file, sets);
    return "";
  } catch (const ConfigError& error) {
    std::string text = error.what();
    // Make messages independent of the temp dir.
    for (size_t pos; (pos = text.find(file.string())) != std::string::npos;) text.replace(pos, file.string().size(), "p.yaml");
    return text;
  }
}

const char* kMinimal = "version: 1\nname: t\nstages:\n  - id: a\n    uses: native:test_echo\n";

}  // namespace

TEST_CASE("a minimal pipeline loads", "[pipeline][loader]") { CHECK(LoadError(kMinimal).empty()); }

TEST_CASE("unknown keys are errors with file:line:col and did-you-mean", "[pipeline][loader]") {
  CHECK(LoadError("version: 1\nname: t\nstages:\n  - id: a\n    uses: native:x\n    wiht: {}\n") ==
        "p.yaml:6:5: error: unknown key 'wiht' in stage (did you mean 'with'?)");
  CHECK(LoadError("version: 1\nname: t\nstagez: []\n") ==
        "p.yaml:3:1: error: unknown key 'stagez' in pipeline (did you mean 'stages'?)\n"
        "p.yaml:1:1: error: pipeline needs a non-empty 'stages' list");
}

TEST_CASE("duplicate keys, which yaml-cpp accepts silently, are errors", "[pipeline][loader]") {
  std::string error = LoadError("version: 1\nname: t\nstages:\n  - id: a\n    uses: native:x\n    id: b\n");
  CHECK_THAT(error, Catch::Contains("p.yaml:6:5: error: duplicate key 'id'"));
  CHECK_THAT(LoadError("version: 1\nname: t\nvars:\n  n: 1\n  n: 2\nstages:\n  - {id: a, uses: native:x}\n"),
             Catch::Contains("p.yaml:5:3: error: duplicate key 'n'"));
}

TEST_CASE("loops must be bounded, shapes and durations are checked", "[pipeline][loader]") {
  CHECK_THAT(LoadError("version: 1\nname: t\nstages:\n  - id: l\n    loop: {until: 'true'}\n    stages:\n      - {id: a, uses: native:x}\n"),
             Catch::Contains("p.yaml:5:11: error: loop needs 'max_iterations' (loops must be bounded)"));
  CHECK_THAT(LoadError("version: 1\nname: t\nstages:\n  - id: l\n    loop: {max_iterations: 3, budget: -1}\n    stages:\n      - {id: a, uses: native:x}\n"),
             Catch::Contains("error: loop budget must be an integer >= 0 or an expression"));
  CHECK_THAT(LoadError("version: 1\nname: t\nstages:\n  - id: l\n    loop: {max_iterations: 3, budget: [1]}\n    stages:\n      - {id: a, uses: native:x}\n"),
             Catch::Contains("error: loop budget must be an integer >= 0 or an expression"));
  CHECK_THAT(LoadError("version: 1\nname: t\nstages:\n  - {id: a, uses: native:x, timeout: soon}\n"),
             Catch::Contains("p.yaml:4:38: error: timeout must be a duration"));
  CHECK_THAT(LoadError("version: 1\nname: t\nstages:\n  - {id: a, uses: native:x}\n  - {id: a, uses: native:x}\n"),
             Catch::Contains("p.yaml:5:10: error: duplicate stage id 'a'"));
  CHECK_THAT(LoadError("version: 1\nname: t\nstages:\n  - {id: a-b, uses: native:x}\n"),
             Catch::Contains("must match [A-Za-z_][A-Za-z0-9_]*"));
  CHECK_THAT(LoadError("version: 2\nname: t\nstages:\n  - {id: a, uses: native:x}\n"),
             Catch::Contains("p.yaml:1:10: error: unsupported pipeline version 2"));
  CHECK_THAT(LoadError("version: 1\nname: t\nstages:\n  - {id: a, uses: native:x, on_failure: maybe}\n"),
             Catch::Contains("on_failure must be 'fail' or 'continue'"));
}

TEST_CASE("invalid YAML reports the parser's position", "[pipeline][loader]") {
  CHECK_THAT(LoadError("version: 1\nname: [t\n"), Catch::StartsWith("p.yaml:3:1: error: invalid YAML"));
}

TEST_CASE("set overrides are typed like YAML and limited to settable keys", "[pipeline][loader]") {
  TempDir dir;
  // --set may only change declared vars and backend settings (docs/pipelines.md).
  auto file = dir.Write("p.yaml", std::string(kMinimal) + "vars:\n  n: 1\n  name: x\n  list: []\n  deep: {}\nbackend:\n  target: trn1\n");
  Pipeline p = LoadPipeline(file, {"vars.n=5", "vars.list=[1, 2]", "vars.name=abc", "backend.target=trn2", "vars.deep.x=true"});
  CHECK(p.vars["n"] == 5);
  CHECK(p.vars["list"] == nlohmann::json::array({1, 2}));
  CHECK(p.vars["name"] == "abc");
  CHECK(p.vars["deep"]["x"] == true);
  CHECK(p.backend["target"] == "trn2");
  CHECK_THAT(p.resolved_yaml, Catch::Contains("target: trn2"));
  CHECK_THAT(LoadError(kMinimal, {"stages=[]"}), Catch::Contains("--set can change vars.*, backend.*, llm.* or name"));
  CHECK_THAT(LoadError(kMinimal, {"vars.x"}), Catch::Contains("--set expects KEY=VALUE"));
}

TEST_CASE("YAML scalars follow the core schema, quoted scalars stay strings", "[pipeline][loader]") {
  TempDir dir;
  auto file = dir.Write("p.yaml", std::string(kMinimal) +
                                      "vars: {i: 3, f: 2.5e-5, b: true, n: null, s: hello, q: '3', e: ~, neg: -4}\n");
  Pipeline p = LoadPipeline(file);
  CHECK(p.vars["i"].is_number_integer());
  CHECK(p.vars["f"].get<double>() == Approx(2.5e-5));
  CHECK(p.vars["b"] == true);
  CHECK(p.vars["n"].is_null());
  CHECK(p.vars["e"].is_null());
  CHECK(p.vars["s"] == "hello");
  CHECK(p.vars["q"] == "3");
  CHECK(p.vars["neg"] == -4);
}
