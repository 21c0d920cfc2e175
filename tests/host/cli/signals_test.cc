// Ctrl-C, SIGTERM, fatal signals and start-up failures: run.json always ends
// in a final state (never "running").
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "support/test_support.h"

extern char** environ;

using namespace accelopt::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

pid_t Spawn(const std::vector<std::string>& args) {
  std::vector<std::string> storage{ACCELOPT_HOST_BINARY};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  posix_spawn(&pid, ACCELOPT_HOST_BINARY, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// Waits until `path` exists (the run reached a known point); false after a minute.
bool WaitFor(const fs::path& path) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// waitpid with a generous safety net (a hung host is killed and reported).
int Reap(pid_t pid) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL("the host did not exit");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
}

const char* kStuck = R"(version: 1
name: stuck
stages:
  - id: stuck
    uses: native:test_concurrent   # ignores its cancel flag
    with: {ms: 120000}
  - id: after
    uses: native:test_echo
    with: {value: 1}
)";

const char* kSleepy = R"(version: 1
name: sleepy
stages:
  - id: nap
    uses: native:test_sleep        # polls its cancel flag
    with: {ms: 120000}
)";

struct PluginPath {
  PluginPath() { ::setenv("ACCELOPT_PLUGIN_PATH", ACCELOPT_TEST_PLUGIN_DIR, 1); }
  ~PluginPath() { ::unsetenv("ACCELOPT_PLUGIN_PATH"); }
};

}  // namespace

TEST_CASE("a second SIGINT exits at once and leaves run.json interrupted", "[cli][signals]") {
  PluginPath plugins;
  TempDir dir;
  auto run_dir = dir.path() / "run";
  pid_t pid = Spawn({"run", dir.Write("p.yaml", kStuck).string(), "--run-dir", run_dir.string()});
  REQUIRE(pid > 0);
  REQUIRE(WaitFor(run_dir / "stages/01-stuck/inputs.json"));
  ::kill(pid, SIGINT);  // the stage ignores its cancel flag, so the run cannot end by itself
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(pid, SIGINT);
  int status = Reap(pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  json run = ReadJson(run_dir / "run.json");
  CHECK(run["status"] == "interrupted");
  CHECK_THAT(run["error"]["message"].get<std::string>(), Catch::Contains("second SIGINT/SIGTERM"));
  CHECK_FALSE(fs::exists(run_dir / "stages/02-after"));
}

TEST_CASE("one SIGTERM cancels the running stage and the run ends interrupted", "[cli][signals]") {
  PluginPath plugins;
  TempDir dir;
  auto run_dir = dir.path() / "run";
  pid_t pid = Spawn({"run", dir.Write("p.yaml", kSleepy).string(), "--run-dir", run_dir.string()});
  REQUIRE(pid > 0);
  REQUIRE(WaitFor(run_dir / "stages/01-nap/inputs.json"));
  ::kill(pid, SIGTERM);
  int status = Reap(pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  json run = ReadJson(run_dir / "run.json");
  CHECK(run["status"] == "interrupted");
  CHECK(ReadJson(run_dir / "stages/01-nap/status.json")["error"]["kind"] == "cancelled");
}

TEST_CASE("a fatal signal leaves run.json crashed", "[cli][signals]") {
  struct rlimit no_core {0, 0};
  ::getrlimit(RLIMIT_CORE, &no_core);
  no_core.rlim_cur = 0;
  ::setrlimit(RLIMIT_CORE, &no_core);
  PluginPath plugins;
  TempDir dir;
  auto run_dir = dir.path() / "run";
  pid_t pid = Spawn({"run", dir.Write("p.yaml", kStuck).string(), "--run-dir", run_dir.string()});
  REQUIRE(pid > 0);
  REQUIRE(WaitFor(run_dir / "stages/01-stuck/inputs.json"));
  ::kill(pid, SIGSEGV);  // no core file: the limit was set to 0 before spawning
  int status = Reap(pid);
  CHECK(WIFSIGNALED(status));
  CHECK(ReadJson(run_dir / "run.json")["status"] == "crashed");
}

TEST_CASE("a symlinked workers/ folder in the run directory is refused before anything runs", "[cli][signals][run_dir]") {
  PluginPath plugins;
  TempDir dir;
  TempDir outside;
  auto victim = outside.Write("victim.txt", "precious");
  auto run_dir = dir.path() / "run";
  fs::create_directories(run_dir);
  fs::create_directory_symlink(outside.path(), run_dir / "workers");
  auto result = RunHost({"run", dir.Write("p.yaml", "version: 1\nname: t\nstages:\n  - {id: a, uses: native:test_echo}\n").string(),
                         "--run-dir", run_dir.string()});
  INFO(result.output);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.output, Catch::Contains("workers: refusing a symlink"));
  json run = ReadJson(run_dir / "run.json");
  CHECK(run["status"] == "failed");
  CHECK_THAT(run["error"]["message"].get<std::string>(), Catch::Contains("refusing a symlink"));
  CHECK(std::distance(fs::directory_iterator(outside.path()), fs::directory_iterator()) == 1);
}

TEST_CASE("bad pipeline bytes exit 2 with file:line:col, validate and run alike", "[cli][yaml]") {
  TempDir dir;
  auto file = dir.Write("p.yaml", "version: 1\nname: t\nvars: {x: \"a\xFF\"}\nstages:\n  - {id: a, uses: native:test_echo}\n");
  for (const char* command : {"validate", "run"}) {
    INFO(command);
    auto result = RunHost({command, file.string()});
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.output, Catch::Contains(file.string() + ":3:13: error: invalid UTF-8"));
  }
  auto dev = RunHost({"validate", "/dev/zero"});
  CHECK(dev.exit_code == 2);
  CHECK_THAT(dev.output, Catch::Contains("/dev/zero: error: not a regular file"));
  // The 663-byte "billion laughs" (9 levels of 9 aliases) stops at once instead of taking gigabytes.
  std::string bomb = "version: 1\nname: t\nvars:\n  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (char level = 'b'; level <= 'i'; ++level) {
    const std::string prev(1, static_cast<char>(level - 1)), name(1, level);
    bomb += "  " + name + ": &" + name + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" +
            prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n";
  }
  bomb += "stages:\n  - {id: a, uses: native:test_echo, with: {value: *i}}\n";
  auto laughs = dir.Write("laughs.yaml", bomb);
  for (const char* command : {"validate", "run"}) {
    auto result = RunHost({command, laughs.string()});
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.output, Catch::Contains("laughs.yaml:") && Catch::Contains("alias bomb"));
  }
}
