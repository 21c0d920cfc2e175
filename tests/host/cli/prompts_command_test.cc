// `accelopt-host prompts render` (host/src/cli/prompts_command.cc): the dry run of
// the LLM stages, end to end through the binary. No LLM is configured or called.
#include <catch2/catch.hpp>

#include <fstream>

#include "host/optimize/optimize_fixture.h"
#include "support/test_support.h"

using namespace accelopt::testing;
using nlohmann::json;

namespace {

const std::string kPipeline = SourcePath("pipelines/nkibench-optimize.yaml").string();

std::vector<std::string> Render(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"prompts", "render", kPipeline, "--case", "silu_M256_N1024"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace

TEST_CASE("prompts render prints every stage's prompts for a case without an LLM", "[cli][prompts]") {
  auto result = RunHost(Render({}));
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  for (const char* stage : {"planner", "executor", "fixer", "summarizer"}) {
    CHECK_THAT(result.output, Catch::Contains(std::string("===== ") + stage + " / system ====="));
    CHECK_THAT(result.output, Catch::Contains(std::string("===== ") + stage + " / user ====="));
  }
  // The baseline was profiled: its measured metrics, the launch cost and % of peak are shown.
  CHECK_THAT(result.output, Catch::Contains("- latency: 0.0"));
  CHECK_THAT(result.output, Catch::Contains("an estimate of the emulator's cost model"));
  CHECK_THAT(result.output, Catch::Contains("- launch_ms: 0.03 ms"));
  CHECK_THAT(result.output, Catch::Contains("- percent_of_peak: "));
  CHECK_THAT(result.output, Catch::Contains("This is planner 1 of 12"));
  CHECK_THAT(result.output, Catch::Contains("(dry run) the plan chosen by a planner"));
  CHECK_THAT(result.output, !Catch::Contains("no LLM endpoint"));
}

TEST_CASE("prompts render: --stage, --json, --out, --memory, --plan and a second --kernel", "[cli][prompts]") {
  TempDir dir;
  auto memory = dir.Write("memory.json", json{{"scope", "problem"},
                                              {"items", json::array({{{"title", "Fuse the sigmoid"}, {"description", "d"},
                                                                      {"before", "slow()"}, {"after", "fast()"}, {"speedup", 1.5},
                                                                      {"direction", "regression"},
                                                                      {"case_name", "silu_M256_N1024"}}})}}
                                                .dump());
  auto plan = dir.Write("plan.txt", "**PLAN:** Use one silu activation\nReplace the four steps.");
  auto fused = dir.Write("fused.py", optimize::kFusedSilu);
  auto broken = dir.Write("broken.py", optimize::kBrokenSilu);

  auto planner = RunHost(Render({"--stage", "planner", "--json", "--memory", memory.string(), "--set", "vars.plans=3"}));
  INFO(planner.output);
  REQUIRE(planner.exit_code == 0);
  json listed = json::parse(planner.output.substr(planner.output.find('[')));
  REQUIRE(listed.size() == 1);
  CHECK(listed[0]["stage"] == "planner");
  CHECK_THAT(listed[0]["system"].get<std::string>(), Catch::Contains("### Fuse the sigmoid"));
  CHECK_THAT(listed[0]["system"].get<std::string>(), Catch::Contains("Slower:\n```python\nslow()\n```\nFaster:\n```python\nfast()"));
  CHECK_THAT(listed[0]["user"].get<std::string>(), Catch::Contains("planner 1 of 3"));

  // A correct second kernel: the summarizer pairs it with the baseline, slow -> fast, measured.
  auto pair = RunHost(Render({"--stage", "summarizer", "--kernel", fused.string(), "--plan", plan.string()}));
  INFO(pair.output);
  REQUIRE(pair.exit_code == 0);
  CHECK_THAT(pair.output, Catch::Contains("The change was produced from the plan \"Use one silu activation\""));
  CHECK_THAT(pair.output, Catch::Contains("nisa.activation(op=nl.silu, data=x_tile)"));
  CHECK_THAT(pair.output, !Catch::Contains("dry run"));
  CHECK_THAT(pair.output, !Catch::Contains("went the other way"));

  // A failing second kernel: the fixer gets its real error; --out writes the files.
  auto out_dir = dir.path() / "out";
  auto fixer = RunHost(Render({"--stage", "fixer", "--kernel", broken.string(), "--out", out_dir.string()}));
  INFO(fixer.output);
  REQUIRE(fixer.exit_code == 0);
  const std::string user = optimize::ReadFile(out_dir / "fixer_user.md");
  CHECK_THAT(user, Catch::Contains("err_unsupported_mixing_basic_advanced_tensor_indexing"));
  CHECK(std::filesystem::exists(out_dir / "fixer_system.md"));
  CHECK_FALSE(std::filesystem::exists(out_dir / "planner_user.md"));

  // The executor prompt carries the given plan and the kernel's NKI names.
  auto executor = RunHost(Render({"--stage", "executor", "--plan", plan.string()}));
  REQUIRE(executor.exit_code == 0);
  CHECK_THAT(executor.output, Catch::Contains("Plan to implement (Use one silu activation):"));
  CHECK_THAT(executor.output, Catch::Contains("NKI names the current kernel uses: `nki.jit`"));
}

TEST_CASE("prompts render: unknown case and a pipeline without prompts exit 2", "[cli][prompts]") {
  auto unknown = RunHost({"prompts", "render", kPipeline, "--case", "silu_M1_N1"});
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.output, Catch::Contains("no case 'silu_M1_N1'"));
  CHECK_THAT(unknown.output, Catch::Contains("silu_M256_N1024"));
  auto no_prompts = RunHost({"prompts", "render", SourcePath("pipelines/nkibench-profile.yaml").string(), "--case", "silu_M256_N1024"});
  CHECK(no_prompts.exit_code == 2);
  CHECK_THAT(no_prompts.output, Catch::Contains("vars.prompts"));
  CHECK(RunHost({"prompts", "render", kPipeline}).exit_code == 2);  // --case is required
  CHECK(RunHost({"prompts", "--help"}).exit_code == 0);
}
