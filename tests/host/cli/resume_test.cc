// kill -9 of the host mid-run, then `run --resume`: nothing finished runs
// again, nothing is lost, and the results equal an uninterrupted run.
#include <catch2/catch.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fcntl.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "core/journal.h"
#include "support/test_support.h"

extern char** environ;

using namespace accelopt::testing;
using nlohmann::json;

namespace {

const char* kPipeline = R"(version: 1
name: resumable
stages:
  - id: fan
    for_each: "${{ {1, 2, 3, 4, 5, 6} }}"
    max_parallel: 1
    uses: native:test_sleep
    with: {ms: "${{ 250 + item }}"}
  - id: total
    uses: native:test_echo
    with: {value: "${{ stages.fan.outputs }}"}
)";

pid_t SpawnHost(const std::vector<std::string>& args) {
  std::vector<std::string> argv_storage{ACCELOPT_HOST_BINARY};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  posix_spawn(&pid, ACCELOPT_HOST_BINARY, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

}  // namespace

TEST_CASE("a run killed with SIGKILL resumes without re-running finished items", "[cli][resume]") {
  ::setenv("ACCELOPT_PLUGIN_PATH", ACCELOPT_TEST_PLUGIN_DIR, 1);
  TempDir dir;
  auto pipeline = dir.Write("p.yaml", kPipeline);
  auto run_dir = dir.path() / "run";

  pid_t pid = SpawnHost({"run", pipeline.string(), "--run-dir", run_dir.string()});
  REQUIRE(pid > 0);
  auto third = run_dir / "stages/01-fan/item-0002/status.json";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(third) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(std::filesystem::exists(third));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK_FALSE(std::filesystem::exists(run_dir / "stages/02-total/outputs.json"));

  auto resumed = RunHost({"run", "--resume", run_dir.string()});
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);

  // Items finished before the kill were reused, not run again.
  int reused = 0, ran = 0;
  bool resumed_seen = false;
  for (const auto& event : accelopt::Journal::Read(run_dir / "journal.jsonl")) {
    if (event.value("event", "") == "run_resumed") resumed_seen = true;
    if (resumed_seen && event.value("event", "") == "item_finished") (event.value("reused", false) ? reused : ran)++;
  }
  CHECK(resumed_seen);
  CHECK(reused >= 3);
  CHECK(reused + ran == 6);
  CHECK(ReadJson(run_dir / "run.json")["status"] == "succeeded");

  // Same results as an uninterrupted run.
  auto fresh_dir = dir.path() / "fresh";
  REQUIRE(RunHost({"run", pipeline.string(), "--run-dir", fresh_dir.string()}).exit_code == 0);
  CHECK(ReadJson(run_dir / "stages/02-total/outputs.json")["value"] ==
        ReadJson(fresh_dir / "stages/02-total/outputs.json")["value"]);
  ::unsetenv("ACCELOPT_PLUGIN_PATH");
}

TEST_CASE("resuming needs a run directory with run.json", "[cli][resume]") {
  TempDir dir;
  auto result = RunHost({"run", "--resume", dir.path().string()});
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.output, Catch::Contains("cannot resume"));
}

TEST_CASE("resume runs again an item whose outputs.json was edited after it was journaled", "[cli][resume]") {
  ::setenv("ACCELOPT_PLUGIN_PATH", ACCELOPT_TEST_PLUGIN_DIR, 1);
  TempDir dir;
  auto pipeline = dir.Write("p.yaml", R"(version: 1
name: tampered
stages:
  - id: fan
    for_each: "${{ {1, 2, 3} }}"
    uses: native:test_echo
    with: {value: "${{ item * 10 }}"}
  - id: total
    uses: native:test_echo
    with: {value: "${{ stages.fan.outputs }}"}
)");
  auto run_dir = dir.path() / "run";
  REQUIRE(RunHost({"run", pipeline.string(), "--run-dir", run_dir.string()}).exit_code == 0);
  // Plant a result: a finished item's outputs are edited after the fact.
  std::ofstream(run_dir / "stages/01-fan/item-0001/outputs.json") << "{\"value\": 999}\n";
  auto resumed = RunHost({"run", "--resume", run_dir.string()});
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.output, Catch::Contains("stages/01-fan/item-0001/outputs.json changed after it was journaled"));
  CHECK(ReadJson(run_dir / "stages/01-fan/item-0001/outputs.json")["value"] == 20);
  CHECK(ReadJson(run_dir / "stages/02-total/outputs.json")["value"][1]["value"] == 20);
  ::unsetenv("ACCELOPT_PLUGIN_PATH");
}
