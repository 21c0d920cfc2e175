// Rendered-prompt snapshots: the prompts the plan, execute, fixer and summarize
// stages send for one fixed silu case are compared with tests/snapshots/prompts/,
// so every prompt change is reviewed as a diff of those files. The dry run
// (native:render_prompts, `accelopt-host prompts render`) must render the same text.
//
// Regenerate after an intended change, then review with `git diff tests/snapshots`:
//   ACCELOPT_UPDATE_SNAPSHOTS=1 build/tests/accelopt-tests "[snapshot]"
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <fstream>
#include <sstream>

#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

namespace {

constexpr const char* kPlanText =
    "PLAN: Fuse the sigmoid into one activation\n"
    "The Vector Engine runs three instructions per tile (add, reciprocal, multiply) after the exp on the\n"
    "Scalar Engine. Replace all four with one `nisa.activation(op=nl.silu, data=x_tile)` per tile.";

const std::filesystem::path kSnapshotDir = SourcePath("tests/snapshots/prompts");

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Compares `actual` with the snapshot `name` (or rewrites it with ACCELOPT_UPDATE_SNAPSHOTS=1).
void CheckSnapshot(const std::string& name, const std::string& actual) {
  const auto file = kSnapshotDir / name;
  if (const char* update = std::getenv("ACCELOPT_UPDATE_SNAPSHOTS"); update && std::string(update) == "1") {
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary | std::ios::trunc) << actual;
    WARN("snapshot written: " << file.string());
    return;
  }
  INFO("snapshot " << file.string() << " (regenerate: ACCELOPT_UPDATE_SNAPSHOTS=1 accelopt-tests \"[snapshot]\")");
  REQUIRE(std::filesystem::exists(file));
  const std::string expected = ReadFile(file);
  if (expected == actual) return;
  auto a = Lines(expected), b = Lines(actual);
  size_t line = 0;
  while (line < a.size() && line < b.size() && a[line] == b[line]) ++line;
  INFO("first difference at line " << line + 1 << "\n  snapshot: " << (line < a.size() ? a[line] : "<end>")
                                   << "\n  rendered: " << (line < b.size() ? b[line] : "<end>"));
  CHECK(expected == actual);
}

// The beam member every stage works from: silu_0 on the small case with a fixed profile.
json Member() {
  return {{"id", "silu_M256_N1024_ID0"},
          {"problem", "silu"},
          {"case_name", "silu_M256_N1024"},
          {"values", {{"M", 256}, {"N", 1024}}},
          {"task", SourcePath("nkibench/reference/silu_M256_N1024_numpy.py").string()},
          {"kernel", SourcePath("nkibench/kernels/silu_0.py").string()},
          {"rel_tol", 2e-5},
          {"latency_ms", 0.04691791596638656},
          {"baseline_latency_ms", 0.04691791596638656},
          {"estimated", true},
          {"lineage", json::array()},
          {"history", json::array({{{"candidate", "silu_M256_N1024-i0-b0p3-s1"}, {"plan_id", "b0p3"},
                                    {"title", "Load 1024 columns per tile"}, {"origin", "llm"}}})},
          {"metrics",
           {{"bottleneck", "dma"}, {"dma_active_time_percent", 0.18479332401017903}, {"estimated", true},
            {"gpsimd_engine_active_time_percent", 0.0}, {"hardware_flops", 0}, {"hbm_read_bytes", 1048576},
            {"hbm_write_bytes", 1048576}, {"hfu_estimated_percent", 0.0}, {"launch_ms", 0.03},
            {"mm_arithmetic_intensity", 0.0}, {"peak_flops_bandwidth_ratio", 223.78048780487805}, {"psum_read_bytes", 0},
            {"psum_write_bytes", 0}, {"sbuf_read_bytes", 6291456}, {"sbuf_write_bytes", 5242880},
            {"scalar_engine_active_time_percent", 0.04676861000939957}, {"spill_reload_bytes", 0}, {"spill_save_bytes", 0},
            {"target", "trn1"}, {"tensor_engine_active_time_percent", 0.0}, {"transpose_flops", 0},
            {"vector_engine_active_time_percent", 0.16563882711662345}}},
          {"peak", {{"percent_of_peak", 11.54}, {"peak_ms", 0.005413}, {"bound", "memory"}, {"validated", true}}}};
}

// Memory with one improvement and one regression (both stored slow -> fast).
json Memory() {
  return {{"scope", "problem"},
          {"items", json::array({{{"title", "Compute silu with one Scalar Engine activation"},
                                  {"description", "The slow kernel computes exp, 1 + e, a reciprocal and a product in four "
                                                  "instructions; the fast one calls nisa.activation(op=nl.silu) once per tile. "
                                                  "Measured 1.155x."},
                                  {"before", "e = nisa.activation(op=nl.exp, data=x, scale=-1.0)\nd = nisa.tensor_scalar(data=e, op0=nl.add, operand0=1.0)"},
                                  {"after", "y = nisa.activation(op=nl.silu, data=x)"},
                                  {"speedup", 1.155},
                                  {"direction", "improvement"},
                                  {"case_name", "silu_M256_N1024"}},
                                 {{"title", "Keep tiles 512 columns wide"},
                                  {"description", "Tiles of 128 columns quadruple the DMA transfers and their fixed costs; "
                                                  "512-column tiles were 1.31x faster."},
                                  {"before", "TILE_N = 128"},
                                  {"after", "TILE_N = 512"},
                                  {"speedup", 1.31},
                                  {"direction", "regression"},
                                  {"case_name", "silu_M256_N1024"}}})}};
}

// The request of a captured LLM call whose user message contains `marker`.
json RequestWith(const std::vector<json>& requests, const std::string& marker) {
  for (const auto& r : requests) {
    if (r["messages"][1]["content"].get<std::string>().find(marker) != std::string::npos) return r;
  }
  FAIL("no request with " << marker);
  return json();
}

std::string System(const json& request) { return request["messages"][0]["content"]; }
std::string User(const json& request) { return request["messages"][1]["content"]; }

}  // namespace

TEST_CASE("prompt snapshots: planner with memory, executor, fixer and summarizer; the dry run renders the same",
          "[optimize][snapshot]") {
  TempDir dir;
  const json member = Member();
  const json memory = Memory();
  const std::string prompts = SourcePath("prompts").string();
  ScopedLlm llm([](const json&) { return Reply("PLAN: nothing\n(no kernel in this reply)"); });

  // Planner (plan 1 of 2) with the memory.
  RunStage("plan", {{"beam", json::array({member})}, {"memory", memory}, {"plans_per_candidate", 2}, {"mode", "llm"},
                    {"prompts", prompts}, {"max_concurrency", 1}},
           dir.path());
  const json planner = RequestWith(llm.Requests(), "planner 1 of 2");
  CheckSnapshot("planner_system.md", System(planner));
  CheckSnapshot("planner_user.md", User(planner));

  // Executor for one plan.
  json plan = {{"plan_id", "b0p0"}, {"title", "Fuse the sigmoid into one activation"}, {"text", kPlanText}, {"origin", "llm"},
               {"candidate", member}};
  RunStage("execute", {{"plans", json::array({plan})}, {"samples_per_plan", 1}, {"mode", "llm"}, {"prompts", prompts}}, dir.path());
  const json executor = RequestWith(llm.Requests(), "Plan to implement");
  CheckSnapshot("executor_system.md", System(executor));
  CheckSnapshot("executor_user.md", User(executor));

  // Fixer for a kernel that failed to compile (the reply has no kernel: one round, no profiling).
  const auto broken = dir.Write("broken.py", kBrokenSilu);
  const json error = {{"kind", "compile_error"},
                      {"message", "broken.py:14: error: [err_unsupported_mixing_basic_advanced_tensor_indexing] Mixing basic "
                                  "tensor indexing and advanced tensor indexing is not supported."},
                      {"traceback", ""}};
  json failed = member;
  failed["id"] = "silu_M256_N1024-i0-b0p1-s0";
  failed["status"] = "failed";
  failed["kernel"] = broken.string();
  failed["error"] = error;
  RunStage("fixer", {{"records", json::array({failed})}, {"rounds", 1}, {"mode", "llm"}, {"prompts", prompts}}, dir.path());
  const json fixer = RequestWith(llm.Requests(), "Kernel that failed");
  CheckSnapshot("fixer_system.md", System(fixer));
  CheckSnapshot("fixer_user.md", User(fixer));

  // Summarizer: one improvement (silu_0 -> fused, 1.2x) and one regression (fused -> silu_0).
  const auto fused = dir.Write("fused.py", kFusedSilu);
  auto record = [&](const std::string& id, const json& kernel, const json& parent_kernel, double parent_ms, double ms) {
    return json{{"id", id}, {"status", "ok"}, {"problem", "silu"}, {"case_name", "silu_M256_N1024"}, {"kernel", kernel},
                {"parent", "p"}, {"parent_kernel", parent_kernel}, {"parent_latency_ms", parent_ms}, {"latency_ms", ms},
                {"speedup", parent_ms / ms}, {"plan", {{"plan_id", id}, {"title", "Fuse the sigmoid into one activation"}}}};
  };
  const double base_ms = member["latency_ms"], fused_ms = base_ms / 1.2;
  RunStage("summarize", {{"records", json::array({record("improve", fused.string(), member["kernel"], base_ms, fused_ms),
                                                  record("regress", member["kernel"], fused.string(), fused_ms, base_ms)})},
                         {"mode", "llm"}, {"prompts", prompts}, {"max_concurrency", 1}},
           dir.path());
  json improvement, regression;
  for (const auto& r : llm.Requests()) {
    if (User(r).find("Slow kernel") == std::string::npos) continue;
    (User(r).find("went the other way") == std::string::npos ? improvement : regression) = r;
  }
  REQUIRE(improvement.is_object());
  REQUIRE(regression.is_object());
  CheckSnapshot("summarizer_system.md", System(improvement));
  CheckSnapshot("summarizer_user.md", User(improvement));
  CheckSnapshot("summarizer_user_regression.md", User(regression));

  // The dry run renders exactly what the stages sent.
  const size_t calls = llm.Requests().size();
  json other_failed = {{"kernel", broken.string()}, {"correct", false}, {"latency_ms", nullptr}, {"error", error}};
  json out = RunStage("render_prompts", {{"candidate", member}, {"memory", memory}, {"prompts", prompts}, {"plans_per_candidate", 2},
                                         {"plan", kPlanText}, {"other", other_failed}},
                      dir.path());
  std::map<std::string, json> by_stage;
  for (const auto& p : out["prompts"]) by_stage[p["stage"]] = p;
  REQUIRE(by_stage.size() == 4);
  CHECK(by_stage["planner"]["system"] == System(planner));
  CHECK(by_stage["planner"]["user"] == User(planner));
  CHECK(by_stage["executor"]["system"] == System(executor));
  CHECK(by_stage["executor"]["user"] == User(executor));
  CHECK(by_stage["fixer"]["system"] == System(fixer));
  CHECK(by_stage["fixer"]["user"] == User(fixer));
  json other_fast = {{"kernel", fused.string()}, {"correct", true}, {"latency_ms", fused_ms}, {"error", nullptr}};
  json pair = RunStage("render_prompts", {{"candidate", member}, {"prompts", prompts}, {"plan", kPlanText}, {"other", other_fast}},
                       dir.path());
  CHECK(pair["prompts"][3]["stage"] == "summarizer");
  CHECK(pair["prompts"][3]["system"] == System(improvement));
  CHECK(pair["prompts"][3]["user"] == User(improvement));
  CHECK(std::filesystem::exists(dir.path() / "render_prompts" / "planner_user.md"));
  CHECK(llm.Requests().size() == calls);  // no model was called
}

TEST_CASE("rendered prompts state the facts of the issue-18 review", "[optimize][snapshot]") {
  TempDir dir;
  json out = RunStage("render_prompts", {{"candidate", Member()}, {"memory", Memory()}, {"prompts", SourcePath("prompts").string()},
                                         {"plan", kPlanText}},
                      dir.path());
  std::map<std::string, std::string> system, user;
  for (const auto& p : out["prompts"]) {
    system[p["stage"]] = p["system"];
    user[p["stage"]] = p["user"];
  }
  // Executor: stay within the kernel's calls and the described APIs.
  CHECK_THAT(system["executor"], Catch::Contains("Stay within known APIs"));
  CHECK_THAT(user["executor"], Catch::Contains("`nisa.activation`, `nl.exp`, `nisa.tensor_scalar`, `nl.add`, `nisa.reciprocal`"));
  // Experiences read slow -> fast, whatever the step's direction.
  CHECK_THAT(system["planner"], Catch::Contains("Slower:\n```python\nTILE_N = 128\n```\nFaster:\n```python\nTILE_N = 512"));
  CHECK_THAT(system["planner"], !Catch::Contains("(regression"));
  // activation's bias, matmul's hints, indexing, store, lists, formulas.
  for (const auto* fact : {"`bias=1.0` does\n  not compile", "is_moving_onezero", "`mask` is a compile-time predicate",
                           "`x[i_p, 0:512]` is refused", "do not assign an instruction's result directly",
                           "a list index must be an integer or a slice", "2 FLOPs per multiply-accumulate",
                           "hardware_flops / (Tensor Engine peak FLOP/s x latency)", "rotating buffers"}) {
    CHECK_THAT(system["planner"], Catch::Contains(fact));
  }
  // Metrics: engine and DMA time, bottleneck, % of peak, launch cost, estimate, 4 significant figures.
  for (const auto* line : {"- latency: 0.04692 ms (an estimate of the emulator's cost model, not a measurement on Trainium)",
                           "- launch_ms: 0.03 ms (63.9 % of the latency)",
                           "- percent_of_peak: 11.5 % (lower bound 0.005413 ms, set by HBM traffic: the problem is memory-bound)",
                           "- tensor_engine_active_time_percent: 0 % (0 % of the time after the launch cost)",
                           "- dma_active_time_percent: 18.5 % (51.2 % of the time after the launch cost)",
                           "- vector_engine_active_time_percent: 16.6 % (45.9 % of the time after the launch cost)", "- bottleneck: dma",
                           "- peak_flops_bandwidth_ratio: 223.8 FLOP/byte", "- hbm_read_bytes: 1048576 bytes"}) {
    CHECK_THAT(user["planner"], Catch::Contains(line));
  }
  CHECK_THAT(user["planner"], !Catch::Contains("fraction"));
  CHECK_THAT(system["planner"], !Catch::Contains("fraction 0-1"));
}

// Prompts per target (docs/prompts.md, "Prompts per target"): backend.target picks the
// partials of prompts/targets/<target>/; the stages and the dry run render the same text.
TEST_CASE("prompt snapshots per target: trn2 prompts teach the SDK 2.28 nki forms and NeuronCore-v3 facts, trn1 the legacy API",
          "[optimize][snapshot]") {
  TempDir dir;
  const std::string prompts = SourcePath("prompts").string();
  json member = Member();
  member["metrics"]["target"] = "trn2";
  std::map<std::string, std::map<std::string, std::string>> system, user;  // target -> stage -> text
  for (const char* target : {"trn1", "trn2"}) {
    json out = RunStage("render_prompts", {{"candidate", member}, {"memory", Memory()}, {"prompts", prompts}, {"plan", kPlanText},
                                           {"plans_per_candidate", 2}, {"target", target}},
                        dir.path());
    for (const auto& p : out["prompts"]) {
      system[target][p["stage"]] = p["system"];
      user[target][p["stage"]] = p["user"];
    }
  }
  for (const char* stage : {"planner", "executor", "fixer"}) {
    CheckSnapshot(std::string("trn2/") + stage + "_system.md", system["trn2"][stage]);
    CHECK_THAT(system["trn2"][stage], Catch::Contains("NeuronCore-v3, SDK 2.28 `nki` API"));
    CHECK_THAT(system["trn2"][stage], !Catch::Contains("NeuronCore-v2"));
    CHECK_THAT(system["trn1"][stage], Catch::Contains("NeuronCore-v2, legacy `neuronxcc.nki` API"));
    for (const char* beta2 : {"dst=", "dma_copy", "NeuronCore-v3", "import nki\n"}) CHECK_THAT(system["trn1"][stage], !Catch::Contains(beta2));
    // The user messages carry the kernel and the problem, not the hardware: the same on both.
    CHECK(user["trn1"][stage] == user["trn2"][stage]);
  }
  CheckSnapshot("trn2/executor_user.md", user["trn2"]["executor"]);
  // The NeuronCore-v3 figures docs/nki-facts.md §3.1 states.
  for (const char* fact : {"128 partitions x 224 KiB", "about 208 KiB per\n  partition", "Tensor Engine (2.4 GHz)",
                           "Vector (0.96 GHz), Scalar (1.2 GHz) and GpSimd (1.2 GHz)", "about 23 bytes/ns",
                           "about 362 GB/s", "79 TFLOP/s bf16, 20 TFLOP/s fp32", "up to 90 % of the DMA rate",
                           "8 banks\n  of 2 KiB"}) {
    CHECK_THAT(system["trn2"]["planner"], Catch::Contains(fact));
  }
  CHECK_THAT(system["trn2"]["executor"], Catch::Contains("must compile with the SDK 2.28 `nki` API (`import nki`, `dst=` instructions)"));
  CHECK_THAT(system["trn1"]["executor"], Catch::Contains("must compile with the legacy `neuronxcc.nki` API, compute"));

  // The stages send what the dry run renders for their target.
  ScopedLlm llm([](const json&) { return Reply("PLAN: nothing\n(no kernel in this reply)"); });
  RunStage("plan", {{"beam", json::array({member})}, {"memory", Memory()}, {"plans_per_candidate", 2}, {"mode", "llm"},
                    {"prompts", prompts}, {"max_concurrency", 1}, {"target", "trn2"}},
           dir.path());
  CHECK(System(RequestWith(llm.Requests(), "planner 1 of 2")) == system["trn2"]["planner"]);
  json plan = {{"plan_id", "b0p0"}, {"title", "Fuse the sigmoid into one activation"}, {"text", kPlanText}, {"origin", "llm"},
               {"candidate", member}};
  RunStage("execute", {{"plans", json::array({plan})}, {"samples_per_plan", 1}, {"mode", "llm"}, {"prompts", prompts}, {"target", "trn2"}},
           dir.path());
  CHECK(System(RequestWith(llm.Requests(), "Plan to implement")) == system["trn2"]["executor"]);
}
