// End-to-end runs of pipelines/nkibench-agent.yaml in rules mode (no LLM) on
// the small cases with the emulator: attempt history, lessons, the divergence
// guard and the speedup the summaries see.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include "support/test_support.h"

extern char** environ;

using namespace accelopt::testing;
using nlohmann::json;

namespace {

std::vector<std::string> AgentArgs(const std::filesystem::path& run_dir, const std::vector<std::string>& sets) {
  std::vector<std::string> args = {"run", SourcePath("pipelines/nkibench-agent.yaml").string(), "--run-dir", run_dir.string(),
                                   "--set", "vars.cases=small", "--set", "backend.nki=emulator", "--set", "vars.mode=rules"};
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  return args;
}

std::vector<json> Lines(const std::filesystem::path& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("agent loop without an LLM: round by round, experiments and lessons persisted, the best kept",
          "[search][agent][e2e]") {
  TempDir dir;
  const auto run_dir = dir.path() / "run";
  auto result = RunHost(AgentArgs(run_dir, {"vars.problems=[silu]", "vars.budget=5"}));
  INFO(result.output);
  REQUIRE(ReadJson(run_dir / "run.json")["status"] == "succeeded");

  const auto experiments = Lines(run_dir / "experiments.jsonl");
  REQUIRE_FALSE(experiments.empty());
  const std::set<std::string> statuses = {"improved", "no_improvement", "correctness_fail", "compile_fail", "divergence_revert"};
  int improved = 0;
  for (size_t i = 0; i < experiments.size(); ++i) {
    const json& e = experiments[i];
    INFO(e.dump());
    CHECK(e["round"] == static_cast<int>(i));  // one attempt per round for one problem
    CHECK(statuses.count(e["status"].get<std::string>()));
    for (const char* key : {"latency_ms", "score", "plan_summary", "error", "profile"}) CHECK(e.contains(key));
    if (e["status"] == "improved") {
      ++improved;
      // The speedup is taken against the best *before* the round (the seed's summarizer saw 1.00x).
      CHECK(e["speedup_vs_best"].get<double>() > 1.0);
      CHECK(e["latency_ms"].get<double>() < e["best_latency_ms_before"].get<double>());
    }
  }
  CHECK(improved >= 1);
  CHECK(Lines(run_dir / "optimize" / "records.jsonl").size() <= 5);  // the budget of evaluations

  const json lessons = ReadJson(run_dir / "lessons.json");
  REQUIRE(lessons["cases"].contains("silu_M256_N1024"));
  const json& list = lessons["cases"]["silu_M256_N1024"];
  REQUIRE_FALSE(list.empty());
  CHECK(list[0]["category"] == "improved");
  CHECK_THAT(list[0]["lesson"].get<std::string>(), Catch::StartsWith("improved "));

  json report = ReadJson(run_dir / "optimize_results.json");
  REQUIRE(report["rows"].size() == 1);
  CHECK(report["rows"][0]["status"] == "improved");
  CHECK(report["rows"][0]["speedup"].get<double>() > 1.1);
  // Screen-then-confirm (vars.screen_seeds: 1): the best was confirmed on every seed; a candidate
  // that did not beat the best was screened only, in one profile call.
  CHECK(report["rows"][0]["winner"]["validation"] == "confirmed");
  for (const auto& record : Lines(run_dir / "optimize" / "records.jsonl")) {
    INFO(record.dump());
    REQUIRE(record.contains("validation"));
    if (record["validation"] == "screened" && record["status"] == "ok") CHECK_FALSE(record.contains("confirm"));
    if (record["validation"] == "confirmed") CHECK(record["validated_seeds"] == json::array({0, 21, 42, 63, 84}));
  }
  CHECK(std::filesystem::exists(run_dir / "best" / "silu_M256_N1024.py"));
  CHECK(std::filesystem::exists(run_dir / "memory.json"));

  // Lessons carry over to a later run: the executor's plan text of its first round shows them.
  const auto second = dir.path() / "second";
  auto again = RunHost(AgentArgs(second, {"vars.problems=[silu]", "vars.budget=1",
                                          "vars.lessons=" + (run_dir / "lessons.json").string()}));
  INFO(again.output);
  REQUIRE(ReadJson(second / "run.json")["status"] == "succeeded");
  const json pick = ReadJson(second / "stages/07-agent/iter-0/02-pick/outputs.json");
  REQUIRE(pick["plans"].size() == 1);
  CHECK_THAT(pick["plans"][0]["text"].get<std::string>(), Catch::Contains("Lessons from the last rounds (reflexion):"));
}

TEST_CASE("agent divergence guard: a slower correct kernel beyond the threshold is reverted with a regression lesson",
          "[search][agent][e2e]") {
  TempDir dir;
  // rmsnorm_matmul's first proposals are slower retilings (a few percent): a 1 % threshold reverts them.
  const auto strict = dir.path() / "strict";
  auto result = RunHost(AgentArgs(strict, {"vars.problems=[rmsnorm_matmul]", "vars.budget=4", "vars.divergence_threshold=1"}));
  INFO(result.output);
  REQUIRE(ReadJson(strict / "run.json")["status"] == "succeeded");
  int reverts = 0;
  for (const auto& e : Lines(strict / "experiments.jsonl")) {
    if (e["status"] != "divergence_revert") continue;
    ++reverts;
    CHECK((e["latency_ms"].get<double>() - e["best_latency_ms_before"].get<double>()) / e["best_latency_ms_before"].get<double>() * 100 > 1.0);
  }
  CHECK(reverts >= 1);
  bool regression = false;
  const json strict_lessons = ReadJson(strict / "lessons.json");
  for (const auto& l : strict_lessons["cases"]["rmsnorm_matmul_K256_M256_N1024"]) {
    regression = regression || l["category"] == "regression";
  }
  CHECK(regression);

  // The default 50 % keeps the same candidates as no_improvement.
  const auto lenient = dir.path() / "lenient";
  result = RunHost(AgentArgs(lenient, {"vars.problems=[rmsnorm_matmul]", "vars.budget=4"}));
  REQUIRE(ReadJson(lenient / "run.json")["status"] == "succeeded");
  for (const auto& e : Lines(lenient / "experiments.jsonl")) CHECK(e["status"] != "divergence_revert");
}

TEST_CASE("agent loop killed with SIGKILL resumes with the same history as an uninterrupted run", "[search][agent][e2e][resume]") {
  TempDir dir;
  const std::vector<std::string> sets = {"vars.problems=[silu]", "vars.budget=6", "vars.isolation=inprocess"};
  const auto fresh = dir.path() / "fresh";
  RunHost(AgentArgs(fresh, sets));
  REQUIRE(ReadJson(fresh / "run.json")["status"] == "succeeded");

  const auto killed = dir.path() / "killed";
  std::vector<std::string> argv_storage{ACCELOPT_HOST_BINARY};
  for (const auto& a : AgentArgs(killed, sets)) argv_storage.push_back(a);
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  REQUIRE(posix_spawn(&pid, ACCELOPT_HOST_BINARY, &actions, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&actions);
  bool reached = false;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
       !reached && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    reached = Lines(killed / "experiments.jsonl").size() >= 2;
  }
  REQUIRE(reached);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  auto resumed = RunHost({"run", "--resume", killed.string()});
  INFO(resumed.output);
  REQUIRE(ReadJson(killed / "run.json")["status"] == "succeeded");
  // the same attempts; error messages name each run's own kernel files
  auto strip = [](const std::filesystem::path& run) {
    std::string text = json(Lines(run / "experiments.jsonl")).dump();
    const std::string prefix = run.string();
    for (size_t at; (at = text.find(prefix)) != std::string::npos;) text.erase(at, prefix.size());
    return text;
  };
  CHECK(strip(killed) == strip(fresh));
  CHECK(ReadJson(killed / "lessons.json") == ReadJson(fresh / "lessons.json"));
  CHECK(ReadJson(killed / "optimize_results.json")["rows"][0]["winner"]["id"] ==
        ReadJson(fresh / "optimize_results.json")["rows"][0]["winner"]["id"]);
}
