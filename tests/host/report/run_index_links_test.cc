// The run index never opens a planted link (issue 34): `index.sqlite` (or its
// journal) made a symlink to another database must not receive the index's
// tables; a FIFO there must not hang `runs`.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <thread>

#include <SQLiteCpp/SQLiteCpp.h>

#include "report/run_index.h"
#include "support/test_support.h"

using namespace accelopt::report;
using accelopt::testing::RunHost;
using accelopt::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// A database of somebody else's with one table.
void MakeVictim(const fs::path& file) {
  SQLite::Database db(file.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  db.exec("CREATE TABLE precious (x INTEGER)");
  db.exec("INSERT INTO precious VALUES (42)");
}

std::vector<std::string> Tables(const fs::path& file) {
  SQLite::Database db(file.string(), SQLite::OPEN_READONLY);
  SQLite::Statement query(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  std::vector<std::string> names;
  while (query.executeStep()) names.push_back(query.getColumn(0).getString());
  return names;
}

std::string OpenError(const fs::path& file) {
  auto done = std::make_shared<std::promise<std::string>>();
  auto result = done->get_future();
  std::thread([done, file] {
    try {
      RunIndex index(file);
      index.List();
      done->set_value("");
    } catch (const std::exception& error) {
      done->set_value(error.what());
    }
  }).detach();  // a hang fails the test instead of the suite
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return "(hung)";
  return result.get();
}

}  // namespace

TEST_CASE("the run index refuses a symlinked index.sqlite and writes nothing through it", "[report][index][security]") {
  TempDir dir;
  fs::create_directory(dir.path() / "runs");
  MakeVictim(dir.path() / "victim.db");
  fs::create_symlink(dir.path() / "victim.db", IndexFile(dir.path() / "runs"));
  std::string error = OpenError(IndexFile(dir.path() / "runs"));
  CHECK_THAT(error, Catch::Contains("index.sqlite") && Catch::Contains("symlink"));
  CHECK(Tables(dir.path() / "victim.db") == std::vector<std::string>{"precious"});

  // A dangling link is refused too (it would create the target).
  fs::create_directory(dir.path() / "runs2");
  fs::create_symlink(dir.path() / "created-elsewhere.db", IndexFile(dir.path() / "runs2"));
  CHECK_THAT(OpenError(IndexFile(dir.path() / "runs2")), Catch::Contains("symlink"));
  CHECK_FALSE(fs::exists(dir.path() / "created-elsewhere.db"));

  // The command says so and fails.
  auto run = RunHost({"runs", "--root", (dir.path() / "runs").string()});
  INFO(run.output);
  CHECK(run.exit_code != 0);
  CHECK_THAT(run.output, Catch::Contains("index.sqlite") && Catch::Contains("symlink"));
  CHECK(Tables(dir.path() / "victim.db") == std::vector<std::string>{"precious"});
}

TEST_CASE("the run index refuses a FIFO or folder as index.sqlite without hanging", "[report][index][security]") {
  TempDir dir;
  REQUIRE(::mkfifo(IndexFile(dir.path()).c_str(), 0600) == 0);
  std::string error = OpenError(IndexFile(dir.path()));
  CHECK_THAT(error, Catch::Contains("index.sqlite") && Catch::Contains("not a regular file"));
  fs::create_directory(dir.path() / "sub");
  fs::create_directory(IndexFile(dir.path() / "sub"));
  CHECK_THAT(OpenError(IndexFile(dir.path() / "sub")), Catch::Contains("not a regular file"));
}

TEST_CASE("a planted journal link is not written through", "[report][index][security]") {
  TempDir dir;
  { RunIndex index(IndexFile(dir.path())); }  // a real index
  dir.Write("victim.txt", "keep me");
  fs::create_symlink(dir.path() / "victim.txt", dir.path() / "index.sqlite-journal");
  std::string error = OpenError(IndexFile(dir.path()));
  CHECK_THAT(error, Catch::Contains("index.sqlite-journal") && Catch::Contains("symlink"));
  std::ifstream in(dir.path() / "victim.txt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "keep me");
}
