// LLM spend caps (docs/llm.md, "Spend caps") in the beam search,
// pipelines/nkibench-optimize.yaml, against a scripted server (small silu case,
// emulator, in-process): a per-problem cap of 3 requests ends the problem's search
// cleanly - the server sees no more than 3 requests, the request over the cap is
// refused before it is sent, the run succeeds, and the report, run.json and the log
// name the cap. `--set llm.default.caps...` is validated like the other fields.
#include <catch2/catch.hpp>

#include <fstream>

#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

namespace {

std::string Role(const json& body) {
  const std::string system = body["messages"][0]["content"];
  if (system.rfind("You are a performance engineer", 0) == 0) return "planner";
  if (system.rfind("You are an NKI kernel engineer", 0) == 0) return "executor";
  return "other";
}

// Planner 1: the real improvement; planner 2: a kernel that does not compile.
std::string Respond(const json& body) {
  const std::string role = Role(body);
  const std::string user = body["messages"][1]["content"];
  if (role == "planner") {
    if (user.find("planner 1 of") != std::string::npos) return "PLAN: fuse the four silu steps into one nisa.activation(op=nl.silu)\nFewer instructions.";
    return "PLAN: load whole rows with advanced indexing\nFewer DMA descriptors.";
  }
  if (role == "executor") return user.find("fuse the four silu steps") != std::string::npos ? Fenced(kFusedSilu) : Fenced(kBrokenSilu);
  return "TITLE: Fuse the silu steps\nDESCRIPTION:\nOne activation instead of four instructions.\n";
}

std::vector<std::string> Args(const std::filesystem::path& run_dir, const std::vector<std::string>& sets) {
  std::vector<std::string> args = {"run", SourcePath("pipelines/nkibench-optimize.yaml").string(), "--run-dir", run_dir.string()};
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  return args;
}

}  // namespace

TEST_CASE("beam search: a per-problem spend cap of 3 requests ends the problem's search cleanly and is reported",
          "[optimize][e2e][llm][spend]") {
  ScriptedLlmServer server(Respond);
  TempDir dir;
  const auto run_dir = dir.path() / "run";
  auto result = RunHost(Args(run_dir, {"vars.cases=small", "vars.problems=[silu]", "backend.nki=emulator", "vars.mode=llm",
                                       "vars.iterations=4", "vars.plans=2", "vars.samples=1", "vars.beam=2",
                                       "vars.isolation=inprocess", "vars.llm_concurrency=1", "llm.default.model=fake-model",
                                       "llm.default.base_url=" + server.BaseUrl(), "llm.default.caps.problem.requests=3",
                                       "llm.default.caps.run.usd=10"}));
  INFO(result.output);
  // Two planner calls and one executor call; the second executor call is refused unsent.
  CHECK(server.Requests().size() == 3);
  const json run = ReadJson(run_dir / "run.json");
  CHECK(run["status"] == "succeeded");
  CHECK(result.exit_code == 0);
  const json llm = run["services"]["llm"];
  CHECK(llm["endpoints"]["default"]["caps"]["problem"]["requests"] == 3);
  CHECK(llm["endpoints"]["default"]["caps"]["run"]["usd"] == 10.0);  // --set reaches the caps
  const json spend = llm["spend"]["default"];
  CHECK(spend["run"]["requests"] == 3);
  CHECK(spend["run"]["refused"] == 1);
  CHECK(spend["problems"]["silu_M256_N1024"]["stopped"] == "spend cap: 3 requests per problem reached (3 spent)");
  CHECK(llm["usage"]["total"]["failed_requests"] == 0);  // a refusal is not a failed request

  // The problem left the beam after the first iteration: no candidate of a later one.
  std::ifstream records(run_dir / "optimize" / "records.jsonl");
  int candidates = 0;
  for (std::string line; std::getline(records, line);) {
    const json record = json::parse(line);
    ++candidates;
    CHECK(record["iteration"] == 0);
    if (record["error"].is_object()) CHECK(record["error"].value("kind", "") != "llm_spend_cap");  // a refusal is no candidate
  }
  CHECK(candidates == 1);

  // The report names the cap, per problem and in the markdown.
  const json report = ReadJson(run_dir / "optimize_results.json");
  REQUIRE(report["rows"].size() == 1);
  CHECK(report["rows"][0]["status"] == "improved");
  CHECK(report["rows"][0]["stopped"] == "spend cap: 3 requests per problem reached (3 spent)");
  CHECK(report["rows"][0]["llm"]["not_sent"] == 1);
  CHECK(report["spend"]["caps"]["problem"]["requests"] == 3);
  CHECK(report["spend"]["run"]["refused"] == 1);
  const std::string md = ReadFile(run_dir / "optimize_results.md");
  CHECK_THAT(md, Catch::Contains("search stopped: spend cap: 3 requests per problem reached (3 spent)"));
  CHECK_THAT(md, Catch::Contains("LLM spend caps (endpoint default): per problem 3 requests / 10000000 tokens / 10 USD"));
  // The log: the caps at start, the spend on the search line, the stop at the end.
  CHECK_THAT(result.output, Catch::Contains("spend caps per problem 3 requests"));
  CHECK_THAT(result.output, Catch::Contains("LLM 3/5000 req"));
  CHECK_THAT(result.output, Catch::Contains("problem silu_M256_N1024: spend cap: 3 requests per problem reached"));
}

TEST_CASE("spend caps set with --set are validated like the other endpoint fields", "[optimize][llm][spend]") {
  const std::string pipeline = SourcePath("pipelines/nkibench-optimize.yaml").string();
  auto bad = RunHost({"validate", pipeline, "--set", "llm.default.model=m", "--set", "llm.default.caps.run.usd=-1"});
  INFO(bad.output);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("llm.default.caps.run.usd") && Catch::Contains("non-negative"));
  auto typo = RunHost({"validate", pipeline, "--set", "llm.default.model=m", "--set", "llm.default.caps.problem.request=3"});
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.output, Catch::Contains("did you mean 'requests'"));
  auto good = RunHost({"validate", pipeline, "--set", "llm.default.model=m", "--set", "llm.default.caps.run.usd=10"});
  INFO(good.output);
  CHECK(good.exit_code == 0);
}
