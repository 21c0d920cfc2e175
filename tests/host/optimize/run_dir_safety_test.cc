// What an optimize run writes into its run directory cannot be redirected by
// a planted link, and LLM text cannot inject markup into its report (issue 34).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// One profile result for native:score (a fresh candidate id each: score appends a candidate once).
json Result(const fs::path& kernel) {
  static int next = 0;
  return {{"case", {{"id", "c" + std::to_string(++next)}, {"case_name", "silu_M256_N1024"}, {"problem", "silu"}, {"kernel", kernel.string()},
                    {"parent_latency_ms", 1.0}, {"baseline_latency_ms", 1.0}}},
          {"compiled", true}, {"correct", true}, {"latency_ms", 0.5}};
}

std::string StageErrorOf(const std::string& stage, const json& with, const fs::path& dir) {
  try {
    RunStage(stage, with, dir);
  } catch (const std::exception& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("score: a planted optimize/records.jsonl link is refused, nothing appended through it", "[optimize][security]") {
  TempDir dir;
  auto kernel = dir.Write("k.py", "x = 1\n");
  TempDir outside;
  auto victim = outside.Write("victim.txt", "keep me\n");
  fs::create_directories(dir.path() / "optimize");
  fs::create_symlink(victim, dir.path() / "optimize/records.jsonl");
  std::string error = StageErrorOf("score", {{"results", json::array({Result(kernel)})}}, dir.path());
  CHECK_THAT(error, Catch::Contains("records.jsonl") && Catch::Contains("refusing a symlink"));
  CHECK(Slurp(victim) == "keep me\n");

  // The folder itself planted as a link.
  fs::remove_all(dir.path() / "optimize");
  fs::create_directory_symlink(outside.path(), dir.path() / "optimize");
  error = StageErrorOf("score", {{"results", json::array({Result(kernel)})}}, dir.path());
  CHECK_THAT(error, Catch::Contains("optimize") && Catch::Contains("refusing a symlink"));
  CHECK_FALSE(fs::exists(outside.path() / "records.jsonl"));

  // Without links the records are appended as before.
  fs::remove(dir.path() / "optimize");
  RunStage("score", {{"results", json::array({Result(kernel)})}}, dir.path());
  RunStage("score", {{"results", json::array({Result(kernel)})}}, dir.path());
  std::string records = Slurp(dir.path() / "optimize/records.jsonl");
  CHECK(std::count(records.begin(), records.end(), '\n') == 2);
}

TEST_CASE("optimize_results: a planted best/ link does not receive the winning kernel", "[optimize][security]") {
  TempDir dir;
  auto base = dir.Write("base.py", "x = 1\n");
  auto winner_file = dir.Write("win.py", "x = 2  # faster\n");
  TempDir outside;
  fs::create_directory_symlink(outside.path(), dir.path() / "best");
  json best = {{"silu_M256_N1024", {{"id", "w"}, {"origin", "executor"}, {"latency_ms", 0.5}, {"kernel", winner_file.string()}}}};
  json out = RunStage("optimize_results", {{"baselines", SiluBaselines(base)}, {"best", best}}, dir.path());
  CHECK(fs::is_empty(outside.path()));
  // The row keeps the kernel where it was instead of a copy outside the run.
  CHECK(out["rows"][0]["kernel"] == winner_file.string());
}

TEST_CASE("optimize_results.md escapes HTML and table syntax from LLM plan titles", "[optimize][security]") {
  TempDir dir;
  auto base = dir.Write("base.py", "x = 1\n");
  auto winner_file = dir.Write("win.py", "x = 2\n");
  json history = json::array({{{"title", "<img src=x onerror=alert(1)>"}},
                              {{"title", "<script>fetch('//evil')</script> | fake | cells\nnew row"}}});
  json best = {{"silu_M256_N1024", {{"id", "w<b>"}, {"origin", "executor"}, {"latency_ms", 0.5},
                                    {"kernel", winner_file.string()}, {"history", history}}}};
  RunStage("optimize_results", {{"baselines", SiluBaselines(base)}, {"best", best}}, dir.path());
  std::string md = Slurp(dir.path() / "optimize_results.md");
  INFO(md);
  CHECK(md.find("<img") == std::string::npos);
  CHECK(md.find("<script") == std::string::npos);
  CHECK(md.find("<b>") == std::string::npos);
  CHECK(md.find("&lt;img src=x onerror=alert(1)&gt;") != std::string::npos);
  CHECK(md.find("&lt;script&gt;") != std::string::npos);
  // One table row per case: the title's pipes and newline do not add cells or rows.
  auto row = md.find("| silu | silu_M256_N1024 |");
  REQUIRE(row != std::string::npos);
  std::string line = md.substr(row, md.find('\n', row) - row);
  CHECK(std::count(line.begin(), line.end(), '|') - std::count(line.begin(), line.end(), '\\') == 12);
  CHECK(md.find("\nnew row") == std::string::npos);
}
