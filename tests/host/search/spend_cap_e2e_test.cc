// LLM spend caps (docs/llm.md, "Spend caps") in the agent loop
// (pipelines/nkibench-agent.yaml) and the graph search (pipelines/nkibench-mcgs.yaml)
// against a scripted server (small silu case, emulator, in-process): a per-problem cap
// of 3 requests ends the problem's search cleanly, with the cap as the reason, instead
// of a failure retried round after round. The server sees no more than 3 requests.
#include <catch2/catch.hpp>

#include <fstream>

#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

namespace {

const char* kReason = "spend cap: 3 requests per problem reached (3 spent)";

std::string Respond(const json& body) {
  const std::string system = body["messages"][0]["content"];
  const std::string user = body["messages"][1]["content"];
  if (system.rfind("You are a performance engineer", 0) == 0) {
    // Plain planner (agent) and vocabulary planner (MCGS) alike.
    return "MOVE: fuse_silu\nPLAN: fuse the silu steps into one activation\nOne ScalarE instruction per tile.";
  }
  if (system.rfind("You are an NKI kernel engineer", 0) == 0) return Fenced(kFusedSilu);
  return "TITLE: fused silu\nDESCRIPTION:\nOne activation.\n";
}

std::vector<std::string> Args(const std::string& pipeline, const std::filesystem::path& run_dir, const std::string& url,
                              const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"run", SourcePath(pipeline).string(), "--run-dir", run_dir.string()};
  std::vector<std::string> sets = {"vars.cases=small", "vars.problems=[silu]", "backend.nki=emulator", "vars.mode=llm",
                                   "vars.isolation=inprocess", "vars.llm_concurrency=1", "llm.default.model=fake-model",
                                   "llm.default.base_url=" + url, "llm.default.caps.problem.requests=3"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  return args;
}

void CheckReported(const std::filesystem::path& run_dir) {
  const json run = ReadJson(run_dir / "run.json");
  CHECK(run["status"] == "succeeded");
  CHECK(run["services"]["llm"]["spend"]["default"]["problems"]["silu_M256_N1024"]["stopped"] == kReason);
  // The stages stop asking once the cap is reached: no request had to be refused.
  CHECK(run["services"]["llm"]["spend"]["default"]["run"]["refused"] == 0);
  const json report = ReadJson(run_dir / "optimize_results.json");
  REQUIRE(report["rows"].size() == 1);
  CHECK(report["rows"][0]["stopped"] == kReason);
  CHECK_THAT(ReadFile(run_dir / "optimize_results.md"), Catch::Contains(std::string("search stopped: ") + kReason));
}

}  // namespace

TEST_CASE("agent loop: a per-problem spend cap of 3 requests finishes the problem with the cap as the reason",
          "[search][agent][e2e][llm][spend]") {
  ScriptedLlmServer server(Respond);
  TempDir dir;
  const auto run_dir = dir.path() / "run";
  auto result = RunHost(Args("pipelines/nkibench-agent.yaml", run_dir, server.BaseUrl(), {"vars.budget=20", "vars.rounds=20", "vars.plans=1"}));
  INFO(result.output);
  CHECK(result.exit_code == 0);
  CHECK(server.Requests().size() <= 3);
  CheckReported(run_dir);
  // A round or two, not 20 rounds of refused requests.
  std::ifstream in(run_dir / "experiments.jsonl");
  int experiments = 0;
  for (std::string line; std::getline(in, line);) ++experiments;
  CHECK(experiments >= 1);
  CHECK(experiments <= 2);
  CHECK_THAT(result.output, Catch::Contains(std::string("silu_M256_N1024: search stopped: ") + kReason));
}

TEST_CASE("graph search: a per-problem spend cap of 3 requests marks the problem done (spend_cap) with the cap as the reason",
          "[search][mcgs][e2e][llm][spend]") {
  ScriptedLlmServer server(Respond);
  TempDir dir;
  const auto run_dir = dir.path() / "run";
  auto result = RunHost(Args("pipelines/nkibench-mcgs.yaml", run_dir, server.BaseUrl(), {"vars.budget=8", "vars.workers=1", "vars.moves=2"}));
  INFO(result.output);
  CHECK(result.exit_code == 0);
  CHECK(server.Requests().size() <= 3);
  CheckReported(run_dir);
  const json graph = ReadJson(run_dir / "search_graph.json");
  const json cg = graph["cases"]["silu_M256_N1024"];
  CHECK(cg["done"] == true);
  CHECK(cg["done_reason"] == "spend_cap");
  CHECK(cg["stop_reason"] == kReason);
  CHECK(cg["evaluations"].get<int>() <= 1);
  bool event = false;
  std::ifstream in(run_dir / "events.jsonl");
  for (std::string line; std::getline(in, line);) {
    const json e = json::parse(line);
    if (e["type"] == "done" && e["reason"] == kReason) event = true;
  }
  CHECK(event);
  CHECK_THAT(ReadFile(run_dir / "trace.md"), Catch::Contains(std::string("search done: ") + kReason));
}
