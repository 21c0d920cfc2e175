// End-to-end runs of pipelines/nkibench-mcgs.yaml in rules mode (no LLM) on
// the small cases with the emulator: the search's files and invariants, the
// budget, and kill -9 + `run --resume` equal to an uninterrupted run.
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

std::vector<std::string> McgsArgs(const std::filesystem::path& run_dir, const std::vector<std::string>& sets) {
  std::vector<std::string> args = {"run", SourcePath("pipelines/nkibench-mcgs.yaml").string(), "--run-dir", run_dir.string(),
                                   "--set", "vars.cases=small", "--set", "backend.nki=emulator", "--set", "vars.mode=rules"};
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  return args;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<json> Lines(const std::filesystem::path& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

// `value` with every occurrence of `prefix` in its strings removed (run directories differ).
json Relative(const json& value, const std::string& prefix) {
  if (value.is_string()) {
    std::string s = value;
    for (size_t at; (at = s.find(prefix)) != std::string::npos;) s.erase(at, prefix.size());
    return s;
  }
  if (value.is_array() || value.is_object()) {
    json out = value;
    for (auto it = out.begin(); it != out.end(); ++it) *it = Relative(*it, prefix);
    return out;
  }
  return value;
}

pid_t SpawnHost(const std::vector<std::string>& args) {
  std::vector<std::string> argv_storage{ACCELOPT_HOST_BINARY};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  posix_spawn(&pid, ACCELOPT_HOST_BINARY, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

int CountType(const std::vector<json>& events, const std::string& type) {
  int n = 0;
  for (const auto& e : events) n += e.value("type", "") == type;
  return n;
}

}  // namespace

TEST_CASE("MCGS without an LLM: a budgeted graph search improves the small kernels and writes its graph, events and trace",
          "[search][mcgs][e2e]") {
  TempDir dir;
  const auto run_dir = dir.path() / "run";
  auto result = RunHost(McgsArgs(run_dir, {"vars.problems=[silu, rmsnorm_matmul]", "vars.budget=6", "vars.workers=2"}));
  INFO(result.output);
  REQUIRE(ReadJson(run_dir / "run.json")["status"] == "succeeded");

  const json graph = ReadJson(run_dir / "search_graph.json");
  REQUIRE(graph["cases"].size() == 2);
  CHECK(graph["done"] == true);
  const auto events = Lines(run_dir / "events.jsonl");
  CHECK(graph["events"].get<size_t>() == events.size());
  int evaluations = 0;
  for (const auto& [case_name, cg] : graph["cases"].items()) {
    INFO(case_name);
    const int used = cg["evaluations"];
    evaluations += used;
    CHECK(used <= 6);
    CHECK((used == 6 || cg["done_reason"] == "exhausted"));
    // One node per state: the canonical hashes are unique (transpositions merged).
    std::set<std::string> hashes;
    int evaluated_nodes = 0;
    for (const auto& [id, node] : cg["nodes"].items()) {
      CHECK(hashes.insert(node["hash"].get<std::string>()).second);
      if (id != "n0") evaluated_nodes += node["status"] != "pending";
      for (const auto& move : node["moves"]) {
        CHECK(move["state"] != "pending");
        if (move["state"] == "expanded") CHECK(cg["nodes"].contains(move["child"].get<std::string>()));
      }
    }
    CHECK(evaluated_nodes == used);
    // Every evaluation visited the root once (plus the baseline's own visit).
    CHECK(cg["nodes"]["n0"]["N"].get<int>() == used + 1);
    CHECK(cg["nodes"].contains(cg["incumbent"].get<std::string>()));
  }
  CHECK(CountType(events, "evaluate") == evaluations);
  CHECK(CountType(events, "root") == 2);
  CHECK(CountType(events, "select") >= evaluations);
  const std::string trace = ReadFile(run_dir / "trace.md");
  CHECK_THAT(trace, Catch::Contains("## Round 0"));
  CHECK_THAT(trace, Catch::Contains("select n0"));
  CHECK(std::filesystem::exists(run_dir / "tactics.json"));
  CHECK_FALSE(ReadJson(run_dir / "tactics.json")["entries"].empty());

  // The common outputs: report, best kernel, records (one per evaluation), memory.
  json report = ReadJson(run_dir / "optimize_results.json");
  CHECK(report["mode"] == "rules");
  REQUIRE(report["rows"].size() == 2);
  bool improved = false;
  for (const auto& row : report["rows"]) {
    CHECK(row["llm"]["requests"] == 0);
    if (row["status"] == "improved") {
      improved = true;
      CHECK(row["speedup"].get<double>() > 1.0);
      CHECK(std::filesystem::exists(run_dir / "best" / (row["case_name"].get<std::string>() + ".py")));
      const json inc = graph["cases"][row["case_name"].get<std::string>()];
      CHECK(row["winner"]["id"] == inc["nodes"][inc["incumbent"].get<std::string>()]["candidate"]);
      // Screen-then-confirm (vars.screen_seeds: 1): the incumbent was confirmed on every seed.
      CHECK(row["winner"]["validation"] == "confirmed");
      CHECK(inc["nodes"][inc["incumbent"].get<std::string>()]["validation"] == "confirmed");
    }
  }
  CHECK(improved);
  const auto records = Lines(run_dir / "optimize" / "records.jsonl");
  CHECK(records.size() == static_cast<size_t>(evaluations));
  for (const auto& record : records) {
    INFO(record.dump());
    REQUIRE(record.contains("validation"));
    // A correct candidate slower than the incumbent is screened only: one profile call, no confirm.
    if (record["validation"] == "screened" && record["status"] == "ok") CHECK_FALSE(record.contains("confirm"));
  }
  CHECK(std::filesystem::exists(run_dir / "memory.json"));

  // Tactic statistics carry over: a second search starts from the first one's counts, and they weight its priors.
  const json first = ReadJson(run_dir / "tactics.json");
  int first_n = 0;
  for (const auto& [key, entry] : first["entries"].items()) first_n += entry["n"].get<int>();
  CHECK(first_n == evaluations);
  const auto second = dir.path() / "second";
  auto again = RunHost(McgsArgs(second, {"vars.problems=[silu, rmsnorm_matmul]", "vars.budget=2",
                                         "vars.tactics=" + (run_dir / "tactics.json").string()}));
  INFO(again.output);
  REQUIRE(ReadJson(second / "run.json")["status"] == "succeeded");
  const json both = ReadJson(second / "tactics.json");
  int both_n = 0;
  for (const auto& [key, entry] : both["entries"].items()) both_n += entry["n"].get<int>();
  int second_evaluations = 0;
  const json second_graph = ReadJson(second / "search_graph.json");
  for (const auto& [case_name, cg] : second_graph["cases"].items()) second_evaluations += cg["evaluations"].get<int>();
  CHECK(both_n == first_n + second_evaluations);
  // the roots' moves: same proposals, other weights once the statistics count
  auto root_moves = [](const std::vector<json>& evs) {
    json out = json::object();
    for (const auto& e : evs) {
      if (e["type"] == "moves" && e["node"] == "n0") out[e["case"].get<std::string>()] = e["moves"];
    }
    return out;
  };
  CHECK(root_moves(Lines(second / "events.jsonl")) != root_moves(events));
}

TEST_CASE("MCGS killed with SIGKILL mid-search resumes to the same search as an uninterrupted run", "[search][mcgs][e2e][resume]") {
  TempDir dir;
  const std::vector<std::string> sets = {"vars.problems=[silu]", "vars.budget=8", "vars.workers=2", "vars.isolation=inprocess",
                                         "vars.max_parallel=1"};
  const auto fresh = dir.path() / "fresh";
  auto uninterrupted = RunHost(McgsArgs(fresh, sets));
  INFO(uninterrupted.output);
  REQUIRE(ReadJson(fresh / "run.json")["status"] == "succeeded");

  const auto killed = dir.path() / "killed";
  pid_t pid = SpawnHost(McgsArgs(killed, sets));
  REQUIRE(pid > 0);
  // Kill once the search has backed up a few evaluations (mid-search, not at its end).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool reached = false;
  while (!reached && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::ifstream in(killed / "events.jsonl");
    int evaluated = 0;
    for (std::string line; std::getline(in, line);) evaluated += line.find("\"evaluate\"") != std::string::npos;
    reached = evaluated >= 3;
  }
  REQUIRE(reached);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(ReadJson(killed / "run.json")["status"] == "running");

  auto resumed = RunHost({"run", "--resume", killed.string()});
  INFO(resumed.output);
  REQUIRE(ReadJson(killed / "run.json")["status"] == "succeeded");

  CHECK(Relative(ReadJson(killed / "search_graph.json"), killed.string()) ==
        Relative(ReadJson(fresh / "search_graph.json"), fresh.string()));
  CHECK(Relative(json(Lines(killed / "events.jsonl")), killed.string()) ==
        Relative(json(Lines(fresh / "events.jsonl")), fresh.string()));
  CHECK(ReadFile(killed / "trace.md") == ReadFile(fresh / "trace.md"));
  const json a = ReadJson(killed / "optimize_results.json")["rows"][0];
  const json b = ReadJson(fresh / "optimize_results.json")["rows"][0];
  CHECK(a["best_latency_ms"] == b["best_latency_ms"]);
  CHECK(a["winner"]["id"] == b["winner"]["id"]);
}
