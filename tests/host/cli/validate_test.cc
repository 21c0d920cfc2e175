// `validate` and `run` refuse what the run would hit, with exit code 2 and
// before any run directory exists; `stages` shows parameters and outputs.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "support/test_support.h"

using namespace accelopt::testing;

TEST_CASE("an undeclared --set variable exits 2 in validate and run, before a run directory exists", "[cli][validate]") {
  TempDir dir;
  const std::string pipeline = SourcePath("pipelines/nkibench-profile.yaml").string();
  auto validate = RunHost({"validate", pipeline, "--set", "vars.case=small"});
  CHECK(validate.exit_code == 2);
  CHECK_THAT(validate.output, Catch::Contains(pipeline + ":15:3: error: --set vars.case=small: the pipeline has no variable "
                                                         "'case' (did you mean 'cases'?)"));
  auto run_dir = dir.path() / "run";
  auto run = RunHost({"run", pipeline, "--set", "vars.case=small", "--run-dir", run_dir.string()});
  CHECK(run.exit_code == 2);
  CHECK_THAT(run.output, Catch::Contains("has no variable 'case'"));
  CHECK_FALSE(std::filesystem::exists(run_dir));
}

TEST_CASE("a value outside a closed set exits 2 at validate time", "[cli][validate]") {
  const std::string pipeline = SourcePath("pipelines/nkibench-profile.yaml").string();
  auto result = RunHost({"validate", pipeline, "--set", "vars.cases=smal", "--set", "backend.target=trn3"});
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.output, Catch::Contains(pipeline + ":34:14: error: parameter 'cases' of native:nkibench_load must be one of "
                                                       "full, small, all, got \"smal\" (did you mean 'small'?) (from ${{ vars.cases }})"));
  CHECK_THAT(result.output, Catch::Contains("parameter 'target' of lua:lua/summary_table.lua must be one of trn1, trn2, got \"trn3\""));
}

TEST_CASE("a bad llm: block exits 2 at validate time and before run creates its directory", "[cli][validate]") {
  TempDir dir;
  auto file = dir.Write("p.yaml",
                        "version: 1\nname: t\nllm:\n  default:\n    base_url: http://127.0.0.1:9/v1\n    model: m\n"
                        "    timeout: abc\nstages:\n  - id: a\n    uses: lua:s.lua\n");
  dir.Write("s.lua", "return function() return {} end\n");
  auto validate = RunHost({"validate", file.string()});
  CHECK(validate.exit_code == 2);
  CHECK_THAT(validate.output, Catch::Contains(file.string() + ":7:14: error: llm.default.timeout: invalid duration \"abc\""));
  auto run = RunHost({"run", file.string(), "--run-dir", (dir.path() / "run").string()});
  CHECK(run.exit_code == 2);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "run"));
}

TEST_CASE("stages shows every built-in stage's outputs and closed sets", "[cli][validate]") {
  auto text = RunHost({"stages"});
  CHECK(text.exit_code == 0);
  CHECK_THAT(text.output, Catch::Contains("outputs:"));
  CHECK_THAT(text.output, Catch::Contains("[one of: full, small, all]"));
  auto listing = RunHost({"stages", "--json"});
  REQUIRE(listing.exit_code == 0);
  auto stages = nlohmann::json::parse(listing.output.substr(listing.output.find("[\n")));
  int built_in = 0;
  for (const auto& stage : stages) {
    std::string origin = stage["origin"];
    bool ours = origin.find("/plugins/") != std::string::npos || origin.find("/pipelines/lua/") != std::string::npos;
    if (!ours) continue;
    ++built_in;
    INFO(stage["uses"]);
    CHECK_FALSE(stage["outputs"].empty());
  }
  CHECK(built_in >= 14);
}

TEST_CASE("Lua stages call Python from the pipeline's python_path, keeping the host's own package", "[cli][python]") {
  TempDir dir;
  dir.Write("pylib/user_helpers.py",
            "import accelopt\n"
            "def combine(a, b, scale=1):\n    return {'value': (a + b) * scale, 'host': accelopt.__name__}\n");
  dir.Write("envlib/env_helpers.py", "def hello(name):\n    return 'hello ' + name\n");
  dir.Write("s.lua",
            "return {\n  outputs = { value = { type = 'integer' }, greeting = { type = 'string' } },\n"
            "  run = function()\n"
            "    local r = accel.python_call('user_helpers', 'combine', {2, 3}, {scale = 10})\n"
            "    return { value = r.value, host = r.host, greeting = accel.python_call('env_helpers', 'hello', {'you'}) }\n"
            "  end,\n}\n");
  auto file = dir.Write("p.yaml", "version: 1\nname: t\npython_path: [pylib]\nstages:\n  - id: s\n    uses: lua:s.lua\n");
  ::setenv("ACCELOPT_PYTHON_PATH", (dir.path() / "envlib").c_str(), 1);
  auto run = RunHost({"run", file.string(), "--run-dir", (dir.path() / "run").string()});
  ::unsetenv("ACCELOPT_PYTHON_PATH");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  auto outputs = ReadJson(dir.path() / "run/stages/01-s/outputs.json");
  CHECK(outputs["value"] == 50);
  CHECK(outputs["host"] == "accelopt");
  CHECK(outputs["greeting"] == "hello you");
  auto missing = dir.Write("q.yaml", "version: 1\nname: t\npython_path: nowhere\nstages:\n  - id: s\n    uses: lua:s.lua\n");
  auto bad = RunHost({"validate", missing.string()});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains(missing.string() + ":3:14: error: python_path folder not found"));
}

TEST_CASE("docs/plugins.md lists the outputs of every built-in stage", "[cli][validate]") {
  auto listing = RunHost({"stages", "--json"});
  REQUIRE(listing.exit_code == 0);
  auto stages = nlohmann::json::parse(listing.output.substr(listing.output.find("[\n")));
  std::ifstream in(SourcePath("docs/plugins.md"));
  std::string docs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& stage : stages) {
    std::string uses = stage["uses"];
    if (uses.rfind("native:", 0) != 0 || stage["origin"].get<std::string>().find("/plugins/") == std::string::npos) continue;
    auto row = docs.find("| `" + uses + "` |");
    INFO(uses);
    REQUIRE(row != std::string::npos);
    std::string line = docs.substr(row, docs.find('\n', row) - row);
    for (const auto& [field, spec] : stage["outputs"].items()) CHECK_THAT(line, Catch::Contains("`" + field + "` (" + spec.value("type", "any") + ")"));
  }
}
