// The search line follows the search's budget: the agent's candidates are at
// most budget x problems, and the graph search does not wait for a problem
// that is done (issue 36, item 9).
#include <catch2/catch.hpp>

#include <regex>
#include <sstream>

#include "support/test_support.h"

using namespace accelopt::testing;

namespace {

// (evaluated, budget) of every logged "search <loop> i/n · e/[≈]b candidates" line.
std::vector<std::pair<int, int>> SearchLines(const std::string& output) {
  std::vector<std::pair<int, int>> out;
  std::istringstream in(output);
  std::regex line(R"(search \w+ \d+/\d+ · (\d+)/(?:≈)?(\d+) candidates)");
  for (std::string text; std::getline(in, text);) {
    std::smatch match;
    if (std::regex_search(text, match, line)) out.push_back({std::stoi(match[1]), std::stoi(match[2])});
  }
  return out;
}

CommandResult RunSearch(const std::string& pipeline, const std::filesystem::path& run_dir, int budget) {
  return RunHostWithEnv({"ACCELOPT_NO_PROGRESS=1"},
                        {"run", SourcePath(pipeline).string(), "--run-dir", run_dir.string(), "--set", "vars.cases=small",
                         "--set", "vars.problems=[silu]", "--set", "vars.budget=" + std::to_string(budget), "--set",
                         "vars.mode=rules"});
}

}  // namespace

TEST_CASE("the agent's search line counts its budget, not its rounds", "[search][progress][e2e]") {
  TempDir dir;
  auto result = RunSearch("pipelines/nkibench-agent.yaml", dir.path() / "run", 3);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  auto lines = SearchLines(result.output);
  REQUIRE_FALSE(lines.empty());
  for (const auto& [evaluated, budget] : lines) {
    CHECK(budget <= 3);  // one problem, budget 3 (not rounds x problems = 50)
    CHECK(evaluated <= budget);
  }
}

TEST_CASE("the graph search's line ends at what it evaluated", "[search][progress][e2e]") {
  TempDir dir;
  auto result = RunSearch("pipelines/nkibench-mcgs.yaml", dir.path() / "run", 4);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  auto lines = SearchLines(result.output);
  REQUIRE_FALSE(lines.empty());
  for (const auto& [evaluated, budget] : lines) CHECK(budget <= 4);
  CHECK(lines.back().first == lines.back().second);  // done: no candidate still "to come"
}
