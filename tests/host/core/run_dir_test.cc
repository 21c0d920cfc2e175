// Run directories never follow a symlink planted inside them.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "core/run_dir.h"
#include "support/test_support.h"

namespace fs = std::filesystem;
using accelopt::EnsurePrivateDir;
using accelopt::OpenForAppendNoFollow;
using accelopt::RunDirectory;
using accelopt::testing::TempDir;

namespace {

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

template <typename Fn>
std::string ErrorOf(Fn&& fn) {
  try {
    fn();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("EnsurePrivateDir creates private folders and refuses symlinks", "[core][run_dir]") {
  TempDir dir;
  auto made = EnsurePrivateDir(dir.path(), "workers/w0");
  CHECK(made == dir.path() / "workers/w0");
  CHECK(fs::is_directory(made));
  CHECK((fs::status(made).permissions() & fs::perms::all) == fs::perms::owner_all);
  CHECK(EnsurePrivateDir(made) == made);  // existing real folder: fine

  // A planted symlink (the attack: workers/ -> a folder outside) is refused, and nothing is created through it.
  TempDir outside;
  fs::create_directory(dir.path() / "run");
  fs::create_directory_symlink(outside.path(), dir.path() / "run/workers");
  CHECK_THAT(ErrorOf([&] { EnsurePrivateDir(dir.path() / "run", "workers/w1"); }),
             Catch::Contains("run/workers: refusing a symlink"));
  CHECK_THAT(ErrorOf([&] { EnsurePrivateDir(dir.path() / "run/workers"); }), Catch::Contains("refusing a symlink"));
  CHECK(fs::is_empty(outside.path()));
  // A symlink as the last component, and a file where a folder should be.
  fs::create_directory(dir.path() / "run/ok");
  fs::create_directory_symlink(outside.path(), dir.path() / "run/ok/w2");
  CHECK_THAT(ErrorOf([&] { EnsurePrivateDir(dir.path() / "run/ok/w2"); }), Catch::Contains("refusing a symlink"));
  dir.Write("run/file", "x");
  CHECK_THAT(ErrorOf([&] { EnsurePrivateDir(dir.path() / "run", "file/w0"); }), Catch::Contains("exists and is not a directory"));
  CHECK_THAT(ErrorOf([&] { EnsurePrivateDir(dir.path(), "../escape"); }), Catch::Contains("'..' is not allowed"));
  CHECK_THAT(ErrorOf([&] { EnsurePrivateDir(dir.path(), "/abs"); }), Catch::Contains("expected a relative path"));
}

TEST_CASE("run directory files are written without following symlinks", "[core][run_dir]") {
  TempDir dir;
  TempDir outside;
  auto victim = outside.Write("victim.txt", "precious");
  RunDirectory run = RunDirectory::Create(dir.path() / "run", "t");

  // A symlink at the destination is replaced, never written through.
  fs::create_directories(run.path() / "stages/01-a");
  fs::create_symlink(victim, run.path() / "stages/01-a/outputs.json");
  run.WriteText("stages/01-a/outputs.json", "{}\n");
  CHECK(Slurp(victim) == "precious");
  CHECK_FALSE(fs::is_symlink(run.path() / "stages/01-a/outputs.json"));
  CHECK(Slurp(run.path() / "stages/01-a/outputs.json") == "{}\n");
  run.WriteJson(run.path() / "stages/01-a/status.json", {{"status", "ok"}});  // absolute paths below the run dir work
  CHECK(fs::exists(run.path() / "stages/01-a/status.json"));

  // A symlinked folder on the way is refused.
  fs::create_directory_symlink(outside.path(), run.path() / "stages/02-b");
  CHECK_THAT(ErrorOf([&] { run.WriteText("stages/02-b/outputs.json", "{}"); }), Catch::Contains("refusing a symlink"));
  CHECK_THAT(ErrorOf([&] { run.EnsureDir("stages/02-b/item-0000"); }), Catch::Contains("refusing a symlink"));
  CHECK_THAT(ErrorOf([&] { run.WriteText("/etc/passwd", "x"); }), Catch::Contains("outside the run directory"));

  // Logs are appended without following a symlink either.
  fs::create_symlink(victim, run.path() / "stages/01-a/log.txt");
  CHECK_THAT(ErrorOf([&] { ::close(OpenForAppendNoFollow(run.path(), "stages/01-a/log.txt")); }),
             Catch::Contains("refusing a symlink"));
  int fd = OpenForAppendNoFollow(run.path(), "stages/03-c/log.txt");
  CHECK(fd >= 0);
  ::close(fd);
  CHECK(Slurp(victim) == "precious");
  CHECK(std::distance(fs::directory_iterator(outside.path()), fs::directory_iterator()) == 1);
}

TEST_CASE("a run directory that is a symlink is refused", "[core][run_dir]") {
  TempDir dir;
  TempDir outside;
  fs::create_directory_symlink(outside.path(), dir.path() / "run");
  CHECK_THAT(ErrorOf([&] { RunDirectory::Create(dir.path() / "run", "t"); }), Catch::Contains("refusing a symlink"));
  // Folders above the run directory are the user's and may be symlinks.
  fs::create_directory_symlink(outside.path(), dir.path() / "link");
  CHECK(RunDirectory::Create(dir.path() / "link/run", "t").path() == dir.path() / "link/run");
}

TEST_CASE("RemoveNoFollow deletes a tree below the run, never a link's target", "[core][run_dir][security]") {
  TempDir dir;
  TempDir outside;
  auto victim = outside.Write("keep/victim.txt", "precious");
  RunDirectory run = RunDirectory::Create(dir.path() / "run", "t");
  dir.Write("run/stages/01-a/build/abc/solution.so", "x");
  dir.Write("run/stages/01-a/build/abc/src/k.cu", "y");
  // Links inside the tree: removed themselves.
  fs::create_directory_symlink(outside.path() / "keep", run.path() / "stages/01-a/build/abc/src/linked-dir");
  fs::create_symlink(victim, run.path() / "stages/01-a/build/abc/linked-file");
  CHECK(accelopt::RemoveNoFollow(run.path(), "stages/01-a/build/abc"));
  CHECK_FALSE(fs::exists(run.path() / "stages/01-a/build/abc"));
  CHECK(Slurp(victim) == "precious");
  CHECK_FALSE(accelopt::RemoveNoFollow(run.path(), "stages/01-a/build/abc"));  // gone: false
  CHECK_FALSE(accelopt::RemoveNoFollow(run.path(), "stages/09-none/build/abc"));

  // The planted build folder of issue 34: stages/*/build -> a folder outside. Refused, nothing deleted.
  fs::create_directory_symlink(outside.path(), run.path() / "stages/02-b");
  CHECK_THAT(ErrorOf([&] { accelopt::RemoveNoFollow(run.path(), "stages/02-b/keep"); }),
             Catch::Contains("stages/02-b: refusing a symlink"));
  CHECK(Slurp(victim) == "precious");
  // A link as the last component: the link goes, its target stays.
  fs::create_directory_symlink(outside.path() / "keep", run.path() / "stages/01-a/build/def");
  CHECK(accelopt::RemoveNoFollow(run.path(), "stages/01-a/build/def"));
  CHECK(Slurp(victim) == "precious");
  CHECK_THAT(ErrorOf([&] { accelopt::RemoveNoFollow(run.path(), "."); }), Catch::Contains("base folder"));
  CHECK_THAT(ErrorOf([&] { accelopt::RemoveNoFollow(run.path(), "../x"); }), Catch::Contains("'..' is not allowed"));
}

TEST_CASE("AppendNoFollow and OpenForReadNoFollow refuse links, FIFOs and folders", "[core][run_dir][security]") {
  TempDir dir;
  TempDir outside;
  auto victim = outside.Write("victim.txt", "precious");
  RunDirectory run = RunDirectory::Create(dir.path() / "run", "t");
  accelopt::AppendNoFollow(run.path(), "optimize/records.jsonl", "{}\n");
  accelopt::AppendNoFollow(run.path(), "optimize/records.jsonl", "{}\n");
  CHECK(Slurp(run.path() / "optimize/records.jsonl") == "{}\n{}\n");
  fs::create_symlink(victim, run.path() / "optimize/fixer.jsonl");
  CHECK_THAT(ErrorOf([&] { accelopt::AppendNoFollow(run.path(), "optimize/fixer.jsonl", "x"); }),
             Catch::Contains("optimize/fixer.jsonl: refusing a symlink"));
  CHECK(Slurp(victim) == "precious");
  REQUIRE(::mkfifo((run.path() / "optimize/fifo").c_str(), 0600) == 0);
  CHECK_THAT(ErrorOf([&] { accelopt::AppendNoFollow(run.path(), "optimize/fifo", "x"); }),
             Catch::Contains("not a regular file") || Catch::Contains("cannot open"));

  int fd = accelopt::OpenForReadNoFollow(run.path(), "optimize/records.jsonl");
  CHECK(fd >= 0);
  ::close(fd);
  CHECK(accelopt::OpenForReadNoFollow(run.path(), "optimize/missing") == -1);
  CHECK(accelopt::OpenForReadNoFollow(run.path(), "missing/records.jsonl") == -1);
  CHECK_THAT(ErrorOf([&] { accelopt::OpenForReadNoFollow(run.path(), "optimize/fixer.jsonl"); }),
             Catch::Contains("refusing a symlink"));
  CHECK_THAT(ErrorOf([&] { accelopt::OpenForReadNoFollow(run.path(), "optimize/fifo"); }),  // does not block
             Catch::Contains("not a regular file"));
  CHECK_THAT(ErrorOf([&] { accelopt::OpenForReadNoFollow(run.path(), "optimize"); }), Catch::Contains("not a regular file"));
}
