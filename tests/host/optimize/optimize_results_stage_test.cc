// native:optimize_results and native:fib_optimize_results under their former names
// optimize_report and fib_optimize_report (issue 40: "report" is the run's HTML page, the
// files a run's last stage writes are its "results"). Both names run the same stage, so
// older pipelines keep working; the files carry the new name.
#include <catch2/catch.hpp>

#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

namespace {

// `rows` / `cases` with each run's own paths (the winning kernel's copy, the best solution file) left out.
json WithoutPaths(json rows) {
  for (auto& row : rows) {
    row.erase("kernel");
    row.erase("file");
  }
  return rows;
}

}  // namespace

TEST_CASE("optimize_results: the former name optimize_report writes the same results", "[optimize]") {
  TempDir dir;
  auto base = dir.Write("base.py", "x = 1\n");
  auto winner = dir.Write("win.py", "x = 2  # faster\n");
  json best = {{"silu_M256_N1024", {{"id", "w"}, {"origin", "executor"}, {"latency_ms", 0.5}, {"kernel", winner.string()}}}};
  json now = RunStage("optimize_results", {{"baselines", SiluBaselines(base)}, {"best", best}}, dir.path() / "a");
  json former = RunStage("optimize_report", {{"baselines", SiluBaselines(base)}, {"best", best}}, dir.path() / "b");
  CHECK(now["json"].get<std::string>() == (dir.path() / "a" / "optimize_results.json").string());
  CHECK(now["markdown"].get<std::string>() == (dir.path() / "a" / "optimize_results.md").string());
  CHECK(former["json"].get<std::string>() == (dir.path() / "b" / "optimize_results.json").string());
  CHECK(WithoutPaths(now["rows"]) == WithoutPaths(former["rows"]));
  CHECK(now["rows"][0]["kernel"].get<std::string>() == (dir.path() / "a" / "best" / "silu_M256_N1024.py").string());
  CHECK(now["geomean_speedup"] == former["geomean_speedup"]);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "a" / "optimize_report.json"));
}

TEST_CASE("fib_optimize_results: the former name fib_optimize_report writes the same results", "[optimize][flashinfer]") {
  TempDir dir;
  json best = {{"rmsnorm_h128", {{"baseline_latency_ms", 2.0}, {"latency_ms", 0.5}, {"solution", {{"name", "s1"}}}}}};
  json now = RunStage("fib_optimize_results", {{"best", best}, {"pipeline", "p"}}, dir.path() / "a");
  json former = RunStage("fib_optimize_report", {{"best", best}, {"pipeline", "p"}}, dir.path() / "b");
  CHECK(WithoutPaths(now["cases"]) == WithoutPaths(former["cases"]));
  CHECK(now["cases"][0]["file"].get<std::string>() == (dir.path() / "a" / "best" / "rmsnorm_h128.json").string());
  CHECK(ReadFile(dir.path() / "a" / "optimize_results.md").find("rmsnorm_h128") != std::string::npos);
  CHECK(std::filesystem::exists(dir.path() / "a" / "optimize_results.json"));
}
