// End-to-end tests of `report`, `runs`, `runs show` and `compare` (host/src/cli/report_command.cc,
// runs_command.cc): real profile and optimize runs on the emulator write report.html and the index.
#include <catch2/catch.hpp>

#include <fstream>

#include "python/interpreter.h"
#include "support/test_support.h"

using namespace accelopt::testing;
namespace fs = std::filesystem;

namespace {

std::string Slurp(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

size_t Count(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

// The page checks of tests/python/report/report_fixtures.py (XML parse, charts, no external reference).
void CheckPage(const fs::path& page) {
  accelopt::python::Exec("from report import report_fixtures as _fx\n"
                         "with open(" + nlohmann::json(page.string()).dump() + ", encoding='utf-8') as _h:\n"
                         "    _fx.check_page(_h.read())\n");
}

}  // namespace

TEST_CASE("runs write report.html and the index read by report and runs and compare", "[cli][report][e2e]") {
  TempDir dir;
  const fs::path root = dir.path() / "runs";
  auto profile = RunHost({"run", SourcePath("pipelines/nkibench-profile.yaml").string(), "--set", "vars.cases=small",
                          "--set", "vars.problems=[silu, adamw]", "--set", "backend.nki=emulator",
                          "--run-dir", (root / "p1-profile").string()});
  INFO(profile.output);
  REQUIRE(profile.exit_code == 0);
  auto optimize = RunHost({"run", SourcePath("pipelines/nkibench-optimize.yaml").string(), "--set", "vars.cases=small",
                           "--set", "vars.problems=[silu, adamw]", "--set", "backend.nki=emulator", "--set",
                           "vars.iterations=2", "--set", "vars.plans=2", "--run-dir", (root / "o1-optimize").string()});
  INFO(optimize.output);
  REQUIRE(optimize.exit_code == 0);

  // The page is written at the end of each run and passes the page checks.
  for (const char* run : {"p1-profile", "o1-optimize"}) {
    const fs::path page = root / run / "report.html";
    REQUIRE(fs::is_regular_file(page));
    CheckPage(page);
  }
  const std::string html = Slurp(root / "o1-optimize" / "report.html");
  CHECK(Count(html, "<svg") >= 6);
  CHECK_THAT(html, Catch::Contains("Speedup of the best kernel over the baseline"));
  CHECK_THAT(html, Catch::Contains("silu_M256_N1024-i0-"));
  CHECK_THAT(optimize.output, Catch::Contains("report: " + (root / "o1-optimize" / "report.html").string()));
  // Without a TTY the search state is logged once per iteration.
  CHECK_THAT(optimize.output, Catch::Contains("search optimize 2/2 · ") && Catch::Contains(" candidates · best "));
  REQUIRE(fs::is_regular_file(root / "index.sqlite"));

  // runs: both, newest first, with the optimize run's geomean speedup.
  auto runs = RunHost({"runs", "--root", root.string()});
  INFO(runs.output);
  CHECK(runs.exit_code == 0);
  CHECK(runs.output.find("o1-optimize") < runs.output.find("p1-profile"));
  CHECK_THAT(runs.output, Catch::Contains("optimize-beam") && Catch::Contains("succeeded") && Catch::Contains("GEOMEAN"));
  auto listed = nlohmann::json::parse(RunHost({"runs", "--root", root.string(), "--json"}).output);
  REQUIRE(listed.size() == 2);
  CHECK(listed[0]["geomean_speedup"].get<double>() > 1.0);
  CHECK(listed[1]["geomean_speedup"].is_null());
  CHECK(listed[0]["problems"].size() == 2);

  // runs show: by unique prefix, with the per-case table; an unknown id is a usage error.
  auto show = RunHost({"runs", "show", "o1", "--root", root.string()});
  INFO(show.output);
  CHECK(show.exit_code == 0);
  CHECK_THAT(show.output, Catch::Contains("silu_M256_N1024") && Catch::Contains("BASELINE MS") && Catch::Contains("report.html"));
  auto unknown = RunHost({"runs", "show", "zz", "--root", root.string()});
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.output, Catch::Contains("no run 'zz'"));

  // compare: the table with bars, and the page with charts.
  auto compare = RunHost({"compare", "p1", "o1", "--root", root.string(), "--out", (dir.path() / "cmp.html").string()});
  INFO(compare.output);
  CHECK(compare.exit_code == 0);
  CHECK_THAT(compare.output, Catch::Contains("silu_M256_N1024") && Catch::Contains("A/B") && Catch::Contains("█") &&
                                 Catch::Contains("B faster on 2"));
  CheckPage(dir.path() / "cmp.html");

  // report: regenerable elsewhere; a folder that is not a run is refused.
  auto again = RunHost({"report", (root / "o1-optimize").string(), "--out", (dir.path() / "again.html").string(), "--json"});
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  auto result = nlohmann::json::parse(again.output.substr(again.output.find('{')));
  CHECK(result["kind"] == "optimize-beam");
  CHECK(result["charts"].get<int>() >= 6);
  CheckPage(dir.path() / "again.html");
  CHECK(RunHost({"report", dir.path().string()}).exit_code == 2);

  // The index is a cache: deleted, it is rebuilt from the run directories.
  fs::remove(root / "index.sqlite");
  auto rebuilt = nlohmann::json::parse(RunHost({"runs", "--root", root.string(), "--rebuild", "--json"}).output);
  CHECK(rebuilt.size() == 2);
  CHECK(rebuilt[0]["id"] == "o1-optimize");
  CHECK(rebuilt[0]["kind"] == "optimize-beam");
}

TEST_CASE("a report that cannot be written is a warning, never a failed run", "[cli][report][e2e]") {
  TempDir dir;
  const fs::path run_dir = dir.path() / "run";
  fs::create_directories(run_dir / "report.html");  // a folder where the page should go
  auto result = RunHost({"run", SourcePath("pipelines/nkibench-profile.yaml").string(), "--set", "vars.cases=small",
                         "--set", "vars.problems=[silu]", "--set", "backend.nki=emulator", "--run-dir", run_dir.string()});
  INFO(result.output);
  CHECK(result.exit_code == 0);
  CHECK(ReadJson(run_dir / "run.json")["status"] == "succeeded");
  CHECK_THAT(result.output, Catch::Contains("report: cannot write"));
  CHECK(fs::is_directory(run_dir / "report.html"));
}

TEST_CASE("runs on a missing root is a usage error", "[cli][report]") {
  TempDir dir;
  auto result = RunHost({"runs", "--root", (dir.path() / "nope").string()});
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.output, Catch::Contains("is not a folder of runs"));
  auto empty = RunHost({"runs", "--root", dir.path().string()});
  CHECK(empty.exit_code == 0);
  CHECK_THAT(empty.output, Catch::Contains("no runs under"));
}
