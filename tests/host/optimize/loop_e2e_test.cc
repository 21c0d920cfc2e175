// End-to-end runs of pipelines/nkibench-optimize.yaml (small silu case, emulator):
// against a scripted LLM server, replayed from its transcript, and rule-based.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <set>

#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

namespace {

const char* kExperienceTitle = "Fuse the silu steps into one Scalar Engine activation";

std::string Role(const json& body) {
  std::string system = body["messages"][0]["content"];
  if (system.rfind("You are a performance engineer", 0) == 0) return "planner";
  if (system.rfind("You are an NKI kernel engineer", 0) == 0) return "executor";
  if (system.rfind("You study pairs", 0) == 0) return "summarizer";
  return "other";
}

// Planner n of 3: 1 = the real improvement, 2 = a kernel that does not compile,
// 3 = an answer without code.
std::string Respond(const json& body) {
  const std::string role = Role(body);
  const std::string user = body["messages"][1]["content"];
  if (role == "planner") {
    if (user.find("planner 1 of") != std::string::npos) return "PLAN: fuse the four silu steps into one nisa.activation(op=nl.silu)\nThe Vector Engine is busy with three instructions per tile.";
    if (user.find("planner 2 of") != std::string::npos) return "PLAN: load whole rows with advanced indexing\nFewer DMA descriptors.";
    return "PLAN: explain only\nNothing to write.";
  }
  if (role == "executor") {
    if (user.find("fuse the four silu steps") != std::string::npos) return Fenced(kFusedSilu);
    if (user.find("advanced indexing") != std::string::npos) return Fenced(kBrokenSilu);
    return "I would not change the code; the kernel is fine as it is.";
  }
  if (role == "summarizer") {
    return std::string("TITLE: ") + kExperienceTitle +
           "\nDESCRIPTION:\nThe slow kernel computes exp, add, reciprocal and multiply per tile on two engines; the fast "
           "kernel issues one silu activation. Fewer instructions, 1.15x faster.\nBEFORE:\n```python\ne_tile = nisa.activation(op=nl.exp, data=x_tile, scale=-1.0)\n```\n"
           "AFTER:\n```python\ny_tile = nisa.activation(op=nl.silu, data=x_tile)\n```\n";
  }
  return "?";
}

std::vector<std::string> BaseArgs(const std::filesystem::path& run_dir) {
  return {"run", SourcePath("pipelines/nkibench-optimize.yaml").string(), "--run-dir", run_dir.string(),
          "--set", "vars.cases=small", "--set", "vars.problems=[silu]", "--set", "backend.nki=emulator",
          "--set", "vars.beam=2", "--set", "vars.max_parallel=2"};
}

std::vector<std::string> With(std::vector<std::string> args, const std::vector<std::string>& sets) {
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  return args;
}

std::vector<json> JsonLines(const std::filesystem::path& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

// What must not differ between a run and its replay.
json Outcome(const std::filesystem::path& run_dir) {
  json report = ReadJson(run_dir / "optimize_results.json");
  json rows = json::array();
  for (const auto& row : report["rows"]) {
    rows.push_back({row["case_name"], row["status"], row["best_latency_ms"], row["speedup"], row["winner"]["id"], row["llm"]["requests"]});
  }
  json records = json::array();
  for (const auto& r : JsonLines(run_dir / "optimize" / "records.jsonl")) {
    records.push_back({r["id"], r["status"], r["latency_ms"], r["error"].is_object() ? r["error"]["kind"] : json()});
  }
  json memory = json::array();
  const json saved = ReadJson(run_dir / "memory.json");
  for (const auto& item : saved["items"]) memory.push_back({item["id"], item["title"], item["speedup"]});
  return {{"rows", rows}, {"records", records}, {"memory", memory}};
}

}  // namespace

TEST_CASE("LLM loop end to end: a real faster kernel reaches select and summarize and memory and the next plan prompt and replay reproduces it",
          "[optimize][e2e]") {
  TempDir dir;
  const auto run1 = dir.path() / "live";
  std::vector<json> requests;
  {
    ScriptedLlmServer server(Respond);
    // In-process profiling: the comparison with the replay must not depend on worker-pool hiccups.
    auto result = RunHost(With(BaseArgs(run1), {"vars.iterations=2", "vars.plans=3", "vars.samples=1", "vars.llm_concurrency=3",
                                                "vars.isolation=inprocess",
                                                "llm.default.base_url=" + server.BaseUrl(), "llm.default.model=fake-model",
                                                "llm.default.price_per_mtok_in=1.0", "llm.default.price_per_mtok_out=2.0"}));
    INFO(result.output);
    json run = ReadJson(run1 / "run.json");
    CHECK(run["status"] == "succeeded");
    CHECK(run["failed_stages"] == 0);
    requests = server.Requests();
  }

  // The report: the fused kernel from iteration 0 won, with its lineage.
  json report = ReadJson(run1 / "optimize_results.json");
  REQUIRE(report["rows"].size() == 1);
  const json& row = report["rows"][0];
  CHECK(row["status"] == "improved");
  CHECK(row["speedup"].get<double>() > 1.05);
  CHECK(row["best_latency_ms"].get<double>() < row["original_latency_ms"].get<double>());
  CHECK(row["percent_of_peak_after"].get<double>() > row["percent_of_peak_before"].get<double>());
  CHECK(row["winner"]["id"] == "silu_M256_N1024-i0-b0p0-s0");
  CHECK(row["winner"]["lineage"] == json::array({"silu_M256_N1024_ID0"}));
  CHECK(row["winner"]["history"][0]["title"] == "fuse the four silu steps into one nisa.activation(op=nl.silu)");
  CHECK_THAT(ReadFile(row["kernel"].get<std::string>()), Catch::Contains("op=nl.silu"));
  CHECK(row["llm"]["requests"].get<int>() > 0);
  CHECK(row["llm"]["cost_usd"].get<double>() > 0);
  CHECK_THAT(ReadFile(run1 / "optimize_results.md"), Catch::Contains("improved"));

  // Every failure was recorded with its kind and the loop went on to iteration 1.
  std::map<std::string, int> kinds;
  for (const auto& r : JsonLines(run1 / "optimize" / "records.jsonl")) {
    if (r["status"] == "failed") ++kinds[r["error"]["kind"].get<std::string>()];
  }
  CHECK(kinds["no_code_block"] >= 2);
  CHECK(kinds["compile_error"] >= 1);
  // Iteration 1 re-derived the broken and the fused kernels, already evaluated in iteration 0:
  // each got one re-ask naming the repeat and was not profiled again (docs/llm.md, "Re-asks").
  CHECK(kinds["repeat"] >= 1);
  CHECK(kinds["unchanged"] >= 1);  // iteration 1 re-derived the fused kernel from itself

  // Memory: the experience with the measured speedup and its lineage, saved at the run level.
  json memory = ReadJson(run1 / "memory.json");
  REQUIRE(memory["items"].size() == 1);  // iteration 1's identical lesson replaced the older one
  CHECK(memory["items"][0]["title"] == kExperienceTitle);
  CHECK(memory["items"][0]["speedup"].get<double>() > 1.05);
  CHECK(memory["items"][0]["lineage"]["parent"] == "silu_M256_N1024_ID0");

  // The summarizer saw the real speedup; the next iteration's planner prompts carry the experience.
  int planners_without = 0, planners_with = 0, summarizer_seen = 0;
  bool order_ok = true;
  for (const auto& body : requests) {
    const std::string role = Role(body);
    if (role == "summarizer") {
      ++summarizer_seen;
      CHECK_THAT(PromptText(body), Catch::Contains("x faster than the slow kernel"));
      CHECK_THAT(PromptText(body), !Catch::Contains("{{speedup}}"));
    }
    if (role != "planner") continue;
    if (PromptText(body).find(kExperienceTitle) != std::string::npos) {
      ++planners_with;
      if (summarizer_seen == 0) order_ok = false;
    } else {
      ++planners_without;
    }
  }
  CHECK(planners_without == 3);  // iteration 0: one beam kernel x 3 plans
  CHECK(planners_with == 6);     // iteration 1: two beam kernels x 3 plans
  CHECK(order_ok);

  // LLM accounting in run.json and the transcript.
  json run = ReadJson(run1 / "run.json");
  const json usage = run["services"]["llm"]["usage"];
  CHECK(usage["total"]["requests"].get<size_t>() == requests.size());
  CHECK(usage["by_stage"].contains("plan"));
  CHECK(usage["by_stage"].contains("execute"));
  CHECK(usage["by_stage"].contains("summarize"));
  CHECK(usage["total"]["cost_usd"].get<double>() > 0);
  REQUIRE(std::filesystem::exists(run1 / "llm" / "transcript.jsonl"));

  // Replay: no server, identical results.
  const auto run2 = dir.path() / "replay";
  auto replay = RunHost(With(BaseArgs(run2), {"vars.iterations=2", "vars.plans=3", "vars.samples=1", "vars.llm_concurrency=3",
                                              "vars.isolation=inprocess",
                                              "llm.replay=" + (run1 / "llm" / "transcript.jsonl").string(),
                                              "llm.default.model=fake-model", "llm.default.base_url=http://127.0.0.1:9/v1"}));
  INFO(replay.output);
  CHECK(ReadJson(run2 / "run.json")["status"] == "succeeded");
  CHECK(Outcome(run2) == Outcome(run1));
  CHECK(ReadJson(run2 / "run.json")["services"]["llm"]["usage"]["total"]["replayed_requests"].get<size_t>() == requests.size());
}

TEST_CASE("a run in which no candidate works still ends with a clear report", "[optimize][e2e]") {
  TempDir dir;
  ScriptedLlmServer server([](const json& body) -> std::string {
    return Role(body) == "planner" ? "PLAN: something" : "No code today.";
  });
  const auto run_dir = dir.path() / "run";
  auto result = RunHost(With(BaseArgs(run_dir), {"vars.iterations=1", "vars.plans=2", "vars.samples=1",
                                                 "llm.default.base_url=" + server.BaseUrl(), "llm.default.model=fake-model"}));
  INFO(result.output);
  CHECK(ReadJson(run_dir / "run.json")["status"] == "succeeded");
  json report = ReadJson(run_dir / "optimize_results.json");
  REQUIRE(report["rows"].size() == 1);
  CHECK(report["rows"][0]["status"] == "no_improvement");
  CHECK(report["rows"][0]["speedup"].get<double>() == Approx(1.0));
  CHECK_THAT(report["rows"][0]["reason"].get<std::string>(), Catch::Contains("no correct candidate"));
  CHECK_THAT(report["rows"][0]["reason"].get<std::string>(), Catch::Contains("no_code_block"));
  CHECK_THAT(ReadFile(run_dir / "optimize_results.md"), Catch::Contains("baseline kept"));
}

TEST_CASE("an LLM reply that rewrites its own latency or computes outside the instruction stream never wins",
          "[optimize][e2e][isolation]") {
  // Issue 34. The source rules are switched off (vars.static_checks=false): what holds is the
  // trusted evaluation, where the candidate's process only traces its program.
  TempDir dir;
  ScriptedLlmServer server([](const json& body) -> std::string {
    const std::string role = Role(body), user = body["messages"][1]["content"];
    if (role == "planner") {
      if (user.find("planner 1 of") != std::string::npos) return "PLAN: flatter the clock\nOne silu activation per tile.";
      return "PLAN: numpy outputs\nNo instructions at all.";
    }
    if (role == "executor") return Fenced(user.find("flatter the clock") != std::string::npos ? kFlatteringSilu : kNumpySilu);
    return "TITLE: none\nDESCRIPTION:\nnone\n";
  });
  const auto run_dir = dir.path() / "run";
  auto result = RunHost(With(BaseArgs(run_dir), {"vars.iterations=1", "vars.plans=2", "vars.samples=1",
                                                 "vars.static_checks=false", "llm.default.base_url=" + server.BaseUrl(),
                                                 "llm.default.model=fake-model"}));
  INFO(result.output);
  json report = ReadJson(run_dir / "optimize_results.json");
  REQUIRE(report["rows"].size() == 1);
  const json& row = report["rows"][0];
  // The flattering kernel is a real fused silu: it may win, at its honest latency only.
  CHECK(row["speedup"].get<double>() < 3.0);
  CHECK(row["best_latency_ms"].get<double>() > 0.2 * row["original_latency_ms"].get<double>());
  std::map<std::string, int> kinds;
  int correct = 0;
  for (const auto& r : JsonLines(run_dir / "optimize" / "records.jsonl")) {
    if (r["status"] == "failed") ++kinds[r["error"]["kind"].get<std::string>()];
    if (r["status"] == "ok") {
      ++correct;
      CHECK(r["latency_ms"].get<double>() > 0.2 * row["original_latency_ms"].get<double>());
      if (r.contains("metrics")) CHECK(r["metrics"].dump().find("flattered") == std::string::npos);
    }
  }
  CHECK(kinds["unwritten_output"] == 1);  // the NumPy outputs are not in its program
  CHECK(correct >= 1);
}

TEST_CASE("without an LLM the same pipeline runs rule-based and improves a kernel", "[optimize][e2e]") {
  TempDir dir;
  const auto run_dir = dir.path() / "run";
  auto result = RunHost(With(BaseArgs(run_dir), {"vars.iterations=2", "vars.plans=4"}));
  INFO(result.output);
  CHECK_THAT(result.output, Catch::Contains("rule-based proposer"));
  CHECK(ReadJson(run_dir / "run.json")["status"] == "succeeded");
  json report = ReadJson(run_dir / "optimize_results.json");
  CHECK(report["mode"] == "rules");
  REQUIRE(report["rows"].size() == 1);
  const json& row = report["rows"][0];
  CHECK(row["status"] == "improved");
  CHECK(row["speedup"].get<double>() > 1.01);
  CHECK(row["llm"]["requests"] == 0);
  CHECK(row["winner"]["history"][0].contains("rule"));
  // Screen-then-confirm (vars.screen_seeds: 1): the best was confirmed on every seed.
  CHECK(row["winner"]["validation"] == "confirmed");
  CHECK(row["winner"]["validated_seeds"] == json::array({0, 21, 42, 63, 84}));
  // The profile's argument shapes travel with every record (accelopt.rules.propose reads them).
  std::ifstream records(run_dir / "optimize" / "records.jsonl");
  std::string line;
  int with_shapes = 0;
  while (std::getline(records, line)) {
    json record = json::parse(line);
    if (record.value("status", "") == "ok") with_shapes += record["input_shapes"].is_array() && !record["input_shapes"].empty();
  }
  CHECK(with_shapes > 0);
  json memory = ReadJson(run_dir / "memory.json");
  CHECK_FALSE(memory["items"].empty());
  CHECK(memory["items"][0]["source"] == "rules");
}

TEST_CASE("an LLM stage past its timeout fails alone: the loop goes on and the report keeps the baseline",
          "[optimize][e2e]") {
  TempDir dir;
  ScriptedLlmServer server([](const json& body) -> std::string {
    if (Role(body) == "planner") std::this_thread::sleep_for(std::chrono::seconds(4));  // a hung endpoint
    return Respond(body);
  });
  const auto run_dir = dir.path() / "run";
  auto result = RunHost(With(BaseArgs(run_dir), {"vars.iterations=2", "vars.plans=3", "vars.samples=1",
                                                 "vars.llm_concurrency=1", "vars.llm_stage_timeout=1s",
                                                 "llm.default.base_url=" + server.BaseUrl(),
                                                 "llm.default.model=fake-model"}));
  INFO(result.output);
  // The loop went on, but a stage failed: the run is failed, exit 1 (docs/cli.md, "Statuses and exit codes").
  CHECK(result.exit_code == 1);
  json run = ReadJson(run_dir / "run.json");
  CHECK(run["status"] == "failed");
  CHECK(run["error"]["stage"] == "plan");
  CHECK(run["error"]["kind"] == "timeout");
  const auto plan_status = ReadJson(run_dir / "stages/06-optimize/iter-0/01-plan/status.json");
  CHECK(plan_status["status"] == "failed");
  CHECK(plan_status["error"]["kind"] == "timeout");
  CHECK(plan_status["seconds"].get<double>() < 3.5);  // given up at the limit, not when the reply came
  // the second iteration ran too, and the baseline result survives in the report
  CHECK(std::filesystem::exists(run_dir / "stages/06-optimize/iter-1/01-plan/status.json"));
  json report = ReadJson(run_dir / "optimize_results.json");
  REQUIRE(report["rows"].size() == 1);
  CHECK(report["rows"][0]["status"] == "no_improvement");
  CHECK(report["rows"][0]["speedup"].get<double>() == Approx(1.0));
  CHECK(report["rows"][0]["original_latency_ms"].get<double>() > 0.0);
  // the stages fed by the failed plan are skipped, not failed on null inputs
  // One plan per iteration, and the report: an LLM run without any candidate fails (docs/llm.md, "Re-asks").
  CHECK(run["failed_stages"] == 3);
  CHECK(report["failure"]["kind"] == "no_candidates");
  CHECK_THAT(result.output, Catch::Contains("stage execute skipped: its input stage 'plan' did not succeed"));
  CHECK_THAT(result.output, Catch::Contains("timed-out stage(s) still running"));
  CHECK_THAT(result.output, !Catch::Contains("Segmentation fault"));
  // the abandoned planner sends none of its queued requests (3 plans, one at a time)
  CHECK(server.Requests().size() == 2);  // the first of each iteration
}
