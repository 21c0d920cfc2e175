// Tests for host/src/report/run_index: the SQLite index of the runs under a root folder.
#include <catch2/catch.hpp>

#include <thread>

#include <SQLiteCpp/SQLiteCpp.h>

#include "report/run_index.h"
#include "support/test_support.h"

using namespace accelopt::report;
using accelopt::testing::TempDir;
namespace fs = std::filesystem;

namespace {

IndexedRun Sample(const std::string& id, const std::string& started, std::optional<double> geomean) {
  IndexedRun run;
  run.id = id;
  run.dir = "/runs/" + id;
  run.name = "nkibench-optimize";
  run.kind = "optimize-beam";
  run.status = "succeeded";
  run.started_at = started;
  run.duration_s = 12.5;
  run.geomean_speedup = geomean;
  run.problems = {{"silu_M256", "silu", 0.05, 0.04, 1.25, "improved"}, {"adamw_M192", "adamw", 0.064, std::nullopt, std::nullopt, "failed"}};
  return run;
}

}  // namespace

TEST_CASE("the run index stores, lists newest first, replaces and removes runs", "[report][index]") {
  TempDir dir;
  RunIndex index(IndexFile(dir.path()));
  index.Upsert(Sample("a", "2026-11-25T10:00:00Z", 1.1));
  index.Upsert(Sample("b", "2026-11-25T11:00:00Z", std::nullopt));
  auto runs = index.List();
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].id == "b");
  CHECK_FALSE(runs[0].geomean_speedup.has_value());
  CHECK(runs[1].geomean_speedup == Approx(1.1));
  REQUIRE(runs[1].problems.size() == 2);
  CHECK(runs[1].problems[0].case_name == "silu_M256");
  CHECK(runs[1].problems[0].speedup == Approx(1.25));
  CHECK_FALSE(runs[1].problems[1].best_ms.has_value());

  IndexedRun changed = Sample("a", "2026-11-25T10:00:00Z", 1.3);
  changed.problems.resize(1);
  changed.status = "failed";
  index.Upsert(changed);
  auto a = index.Find("a");
  REQUIRE(a);
  CHECK(a->status == "failed");
  CHECK(a->problems.size() == 1);
  CHECK(a->ToJson()["geomean_speedup"].get<double>() == Approx(1.3));

  index.Remove("a");
  CHECK_FALSE(index.Find("a"));
  CHECK(index.List().size() == 1);

  // Reopening sees the same rows (a file, not a cache in memory).
  RunIndex again(IndexFile(dir.path()));
  CHECK(again.List().size() == 1);
}

TEST_CASE("ToJson and FromJson round-trip a run, nulls included", "[report][index]") {
  IndexedRun run = Sample("x", "2026-11-25T10:00:00Z", std::nullopt);
  run.candidates = 42;
  IndexedRun back = IndexedRun::FromJson(run.ToJson());
  CHECK(back.ToJson() == run.ToJson());
  CHECK(back.ToJson()["geomean_speedup"].is_null());
  CHECK(IndexedRun::FromJson(nlohmann::json("not an object")).id.empty());
}

TEST_CASE("SyncIndex adds new runs, re-summarizes changed ones, drops vanished ones, and rebuilds", "[report][index]") {
  TempDir dir;
  dir.Write("r1/run.json", "{}");
  dir.Write("r2/run.json", "{}");
  dir.Write("not-a-run/readme.txt", "x");
  dir.Write("broken/run.json", "{}");
  RunIndex index(IndexFile(dir.path()));
  int calls = 0;
  auto summarize = [&](const fs::path& run_dir) {
    ++calls;
    if (run_dir.filename() == "broken") throw std::runtime_error("unreadable");
    IndexedRun run;
    run.status = "succeeded";
    run.started_at = run_dir.filename().string();
    return run;
  };
  std::vector<std::string> errors;
  auto stats = SyncIndex(index, dir.path(), summarize, false, &errors);
  CHECK(stats.added == 2);
  CHECK(calls == 3);
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0], Catch::Contains("broken") && Catch::Contains("unreadable"));
  CHECK(index.Find("r1")->dir == fs::absolute(dir.path() / "r1").lexically_normal().string());

  calls = 0;
  stats = SyncIndex(index, dir.path(), summarize, false, nullptr);
  CHECK(stats.unchanged == 2);
  CHECK(calls == 1);  // only the broken one is tried again

  // run.json rewritten (a resumed run ends): summarized again.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  dir.Write("r1/run.json", "{\"status\": \"failed\"}");
  calls = 0;
  stats = SyncIndex(index, dir.path(), summarize, false, nullptr);
  CHECK(stats.updated == 1);

  fs::remove_all(dir.path() / "r2");
  stats = SyncIndex(index, dir.path(), summarize, false, nullptr);
  CHECK(stats.removed == 1);
  CHECK_FALSE(index.Find("r2"));

  calls = 0;
  stats = SyncIndex(index, dir.path(), summarize, true, nullptr);
  CHECK(stats.added == 1);
  CHECK(calls == 2);
  CHECK(FindRunDirs(dir.path()).size() == 2);  // r1 and broken
}

TEST_CASE("an index from a newer host is refused, not overwritten", "[report][index]") {
  TempDir dir;
  { RunIndex index(IndexFile(dir.path())); }
  {
    SQLite::Database db(IndexFile(dir.path()).string(), SQLite::OPEN_READWRITE);
    db.exec("PRAGMA user_version = 99");
  }
  CHECK_THROWS_WITH(RunIndex(IndexFile(dir.path())), Catch::Contains("newer than this host"));
}
