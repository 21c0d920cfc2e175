// FlashInfer-Bench trace sets (flashinfer/trace_set.h, query.h): loading both
// layouts, FIB's validate checks on broken copies of the fixture, the
// `flashinfer validate` command, queries and AccelOpt's selection.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "flashinfer/query.h"
#include "flashinfer/trace_set.h"
#include "support/test_support.h"

using namespace accelopt::fib;
using accelopt::testing::RunHost;
using accelopt::testing::SourcePath;
using accelopt::testing::TempDir;
namespace fs = std::filesystem;

namespace {

fs::path FixtureRoot() { return SourcePath("tests/fixtures/flashinfer"); }

// A copy of the fixture trace set in a temporary folder.
fs::path CopyFixture(const TempDir& dir) {
  fs::path root = dir.path() / "set";
  fs::copy(FixtureRoot(), root, fs::copy_options::recursive);
  return root;
}

std::string Slurp(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void Put(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

void Replace(const fs::path& path, const std::string& from, const std::string& to) {
  std::string text = Slurp(path);
  auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  Put(path, text);
}

bool HasError(const Problems& problems, const std::string& file, const std::string& text) {
  for (const auto& p : problems)
    if (p.level == Problem::kError && p.file == file && p.message.find(text) != std::string::npos) return true;
  std::string all;
  for (const auto& p : problems) all += "\n  " + p.file + ": " + p.field + ": " + p.message;
  UNSCOPED_INFO("problems:" << all);
  return false;
}

}  // namespace

TEST_CASE("fib trace set: the fixture loads and validates without errors", "[flashinfer]") {
  TraceSet set = LoadTraceSet(FixtureRoot().string());
  CHECK(set.layout == "current");
  CHECK(set.definitions.size() == 4);
  CHECK(set.workloads.size() == 6);
  CHECK(set.solutions.size() == 4);
  CHECK(set.traces.size() == 5);
  CHECK(set.problems.empty());
  Problems problems = Validate(set);
  CHECK(ErrorCount(problems) == 0);
  // FIB's warnings: no descriptions, no baseline author.
  bool baseline_warning = false;
  for (const auto& p : problems) baseline_warning |= p.message.find("no baseline solution for rmsnorm_h16") != std::string::npos;
  CHECK(baseline_warning);
  REQUIRE(set.FindDefinition("gemm_n8_k16"));
  CHECK(set.WorkloadsOf("rmsnorm_h16").size() == 3);
  CHECK(set.SolutionsOf("rmsnorm_h16").size() == 3);
  CHECK(set.TracePath("me", *set.FindDefinition("gemm_n8_k16")) == "traces/me/gemm/gemm_n8_k16.jsonl");
}

TEST_CASE("fib trace set: validate reports each broken file with its field", "[flashinfer]") {
  TempDir dir;
  fs::path root = CopyFixture(dir);
  // definition: name differs from its path; a reference without run.
  Replace(root / "definitions/gemm/gemm_n8_k16.json", "\"op_type\": \"gemm\"", "\"op_type\": \"matmul\"");
  Replace(root / "definitions/elementwise/scale_add_n8.json", "def run(x, b, alpha)", "def forward(x, b, alpha)");
  // workloads: a missing var axis, an unknown input, a blob with the wrong key.
  Replace(root / "workloads/rmsnorm/rmsnorm_h16.jsonl", "\"axes\": {\"batch_size\": 4}", "\"axes\": {}");
  Replace(root / "workloads/gemm/gemm_n8_k16.jsonl", "\"tensor_key\": \"B\"", "\"tensor_key\": \"C\"");
  // solutions: author field vs path; a duplicate name; an entry file not among the sources.
  Replace(root / "solutions/fixture_author/rmsnorm/rmsnorm_h16/wrong_rmsnorm_dps.json", "\"author\": \"fixture_author\"",
          "\"author\": \"someone_else\"");
  Put(root / "solutions/fixture_author/rmsnorm/rmsnorm_h16/copy.json",
      Slurp(root / "solutions/fixture_author/rmsnorm/rmsnorm_h16/torch_rmsnorm_py.json"));
  Replace(root / "solutions/fixture_author/rmsnorm/rmsnorm_h16/triton_rmsnorm_dps.json", "\"main.py::run\"", "\"kernel.py::run\"");
  // traces: an evaluated trace in a workload file; a trace naming an unknown solution; a PASSED without performance.
  {
    std::ofstream out(root / "workloads/rmsnorm/rmsnorm_h16.jsonl", std::ios::app);
    std::ifstream in(root / "traces/fixture_author/rmsnorm/rmsnorm_h16.jsonl");
    std::string first;
    std::getline(in, first);
    out << first << "\n";
  }
  Replace(root / "traces/fixture_author/rmsnorm/rmsnorm_h16.jsonl", "\"solution\": \"torch_rmsnorm_py\", \"evaluation\": {\"status\": \"TIMEOUT\"",
          "\"solution\": \"ghost\", \"evaluation\": {\"status\": \"TIMEOUT\"");
  Replace(root / "traces/fixture_author/rmsnorm/rmsnorm_h16.jsonl",
          ", \"performance\": {\"latency_ms\": 0.0041, \"reference_latency_ms\": 0.0312, \"speedup_factor\": 7.61}", "");

  TraceSet set = LoadTraceSet(root.string());
  Problems problems = Validate(set);
  CHECK(HasError(problems, "definitions/gemm/gemm_n8_k16.json", "definition op_type mismatch"));
  CHECK(HasError(problems, "definitions/elementwise/scale_add_n8.json", "top-level function named 'run'"));
  CHECK(HasError(problems, "workloads/rmsnorm/rmsnorm_h16.jsonl", "missing var axis 'batch_size'"));
  CHECK(HasError(problems, "workloads/rmsnorm/rmsnorm_h16.jsonl", "workload traces only"));
  CHECK(HasError(problems, "workloads/gemm/gemm_n8_k16.jsonl", "workload file path says gemm/gemm_n8_k16"));
  CHECK(HasError(problems, "solutions/fixture_author/rmsnorm/rmsnorm_h16/wrong_rmsnorm_dps.json", "author field 'someone_else'"));
  CHECK(HasError(problems, "solutions/fixture_author/rmsnorm/rmsnorm_h16/torch_rmsnorm_py.json", "duplicate solution name"));
  CHECK(HasError(problems, "solutions/fixture_author/rmsnorm/rmsnorm_h16/triton_rmsnorm_dps.json", "not among the sources"));
  CHECK(HasError(problems, "traces/fixture_author/rmsnorm/rmsnorm_h16.jsonl", "unknown solution 'ghost'"));
  CHECK(HasError(problems, "traces/fixture_author/rmsnorm/rmsnorm_h16.jsonl", "required when status is PASSED"));
  // Fields are given: a line number for JSONL files.
  bool line_field = false;
  for (const auto& p : problems) line_field |= p.field.rfind("line 1: evaluation.performance", 0) == 0;
  CHECK(line_field);

  SECTION("blob problems: missing, wrong key, wrong shape") {
    TempDir other;
    fs::path r2 = CopyFixture(other);
    Replace(r2 / "workloads/gemm/gemm_n8_k16.jsonl", "\"tensor_key\": \"B\"", "\"tensor_key\": \"C\"");
    Replace(r2 / "workloads/gemm/gemm_n8_k16.jsonl", "\"axes\": {\"M\": 4}", "\"axes\": {\"M\": 5}");
    Put(r2 / "workloads/elementwise/scale_add_n8.jsonl",
        R"({"definition": "scale_add_n8", "workload": {"uuid": "u9", "axes": {"n": 3}, "inputs": {"x": {"type": "safetensors", "path": "./blob/none.safetensors", "tensor_key": "x"}, "b": {"type": "random"}, "alpha": {"type": "scalar", "value": 1}}}, "solution": null, "evaluation": null})"
        "\n");
    Problems p = Validate(LoadTraceSet(r2.string()));
    CHECK(HasError(p, "workloads/gemm/gemm_n8_k16.jsonl", "tensor key 'C' not found"));
    CHECK(HasError(p, "workloads/gemm/gemm_n8_k16.jsonl", "A shape mismatch: expected (5, 16), got (4, 16)"));
    CHECK(HasError(p, "workloads/elementwise/scale_add_n8.jsonl", "blob missing at ./blob/none.safetensors"));
  }
}

TEST_CASE("fib trace set: AccelOpt's older layout and single-trace files load", "[flashinfer]") {
  TempDir dir;
  fs::path root = dir.path() / "old";
  fs::create_directories(root);
  fs::copy(FixtureRoot() / "definitions", root / "definitions", fs::copy_options::recursive);
  fs::copy(FixtureRoot() / "blob", root / "blob", fs::copy_options::recursive);
  // solutions/<op_type>/<def>/<name>.json, traces/<op_type>/<def>.jsonl, workloads/<op_type>/<def>_<uuid7>.json
  fs::create_directories(root / "solutions/rmsnorm/rmsnorm_h16");
  fs::copy(FixtureRoot() / "solutions/fixture_author/rmsnorm/rmsnorm_h16/torch_rmsnorm_py.json",
           root / "solutions/rmsnorm/rmsnorm_h16/torch_rmsnorm_py.json");
  std::string legacy = Slurp(root / "solutions/rmsnorm/rmsnorm_h16/torch_rmsnorm_py.json");
  auto at = legacy.find(",\n    \"destination_passing_style\": false");
  REQUIRE(at != std::string::npos);
  legacy.erase(at, std::string(",\n    \"destination_passing_style\": false").size());  // 2025 files have no DPS key
  Put(root / "solutions/rmsnorm/rmsnorm_h16/torch_rmsnorm_py.json", legacy);
  std::ifstream in(FixtureRoot() / "workloads/rmsnorm/rmsnorm_h16.jsonl");
  std::string line;
  std::getline(in, line);
  Put(root / "workloads/rmsnorm/rmsnorm_h16_0000000.json", line);
  std::ifstream traces(FixtureRoot() / "traces/fixture_author/rmsnorm/rmsnorm_h16.jsonl");
  std::string first;
  std::getline(traces, first);
  auto pos = first.find("triton_rmsnorm_dps");
  first.replace(pos, std::string("triton_rmsnorm_dps").size(), "torch_rmsnorm_py");
  Put(root / "traces/rmsnorm/rmsnorm_h16.jsonl", first + "\n");
  TraceSet set = LoadTraceSet(root.string());
  CHECK(set.layout == "accelopt");
  CHECK(set.problems.empty());
  CHECK(set.solutions.size() == 1);
  CHECK_FALSE(set.solutions[0].value.spec.destination_passing_style.has_value());
  CHECK(set.WorkloadsOf("rmsnorm_h16").size() == 1);
  CHECK(set.traces.size() == 1);
  CHECK(ErrorCount(Validate(set)) == 0);
  CHECK(set.TracePath("AccelOpt", *set.FindDefinition("rmsnorm_h16")) == "traces/rmsnorm/rmsnorm_h16.jsonl");
  CHECK(set.SolutionPath(set.solutions[0].value) == "solutions/rmsnorm/rmsnorm_h16/torch_rmsnorm_py.json");
}

TEST_CASE("fib trace set: appending traces adds a missing final newline", "[flashinfer]") {
  TempDir dir;
  fs::path file = dir.path() / "traces/a/rmsnorm/rmsnorm_h16.jsonl";
  TraceSet set = LoadTraceSet(FixtureRoot().string());
  Put(file, "{\"partial\": true}");  // no final newline
  AppendTraces(file.string(), {set.traces[0].value, set.traces[1].value});
  std::string text = Slurp(file);
  CHECK(text.rfind("{\"partial\": true}\n{\"definition\":\"rmsnorm_h16\"", 0) == 0);
  CHECK(std::count(text.begin(), text.end(), '\n') == 3);
}

TEST_CASE("fib trace set: appends and solution writes never follow a planted link", "[flashinfer][isolation]") {
  // Issue 34: a link planted in a trace set (or a run's traces/) made the evaluator append outside.
  TempDir dir;
  TraceSet set = LoadTraceSet(FixtureRoot().string());
  fs::path root = dir.path() / "set", outside = dir.path() / "outside";
  fs::create_directories(root / "traces");
  fs::create_directories(outside);
  fs::create_directory_symlink(outside, root / "traces" / "a");
  CHECK_THROWS_WITH(AppendTraces(root.string(), "traces/a/rmsnorm/rmsnorm_h16.jsonl", {set.traces[0].value}),
                    Catch::Contains("symlink"));
  CHECK_FALSE(fs::exists(outside / "rmsnorm"));
  Put(outside / "victim.jsonl", "keep\n");
  fs::create_directories(root / "traces" / "b");
  fs::create_symlink(outside / "victim.jsonl", root / "traces" / "b" / "x.jsonl");
  CHECK_THROWS(AppendTraces(root.string(), "traces/b/x.jsonl", {set.traces[0].value}));
  CHECK(Slurp(outside / "victim.jsonl") == "keep\n");
  // A solution written over a link replaces the link, never the file it points to.
  fs::create_symlink(outside / "victim.jsonl", root / "solution.json");
  WriteSolution((root / "solution.json").string(), set.solutions[0].value);
  CHECK(Slurp(outside / "victim.jsonl") == "keep\n");
  CHECK_FALSE(fs::is_symlink(root / "solution.json"));
}

TEST_CASE("fib queries: best trace, scores against the baseline author, AccelOpt's pick", "[flashinfer]") {
  TraceSet set = LoadTraceSet(FixtureRoot().string());
  auto traces = set.TracesOf("rmsnorm_h16");
  // The fixture's PASSED trace has max_abs 0.0156: outside FIB's default bounds (1e-2), inside 2e-2.
  CHECK(BestTrace(traces, "rmsnorm_h16") == nullptr);
  const Trace* best = BestTrace(traces, "rmsnorm_h16", nullptr, 2e-2, 2e-2);
  REQUIRE(best);
  CHECK(*best->solution == "triton_rmsnorm_dps");
  Named<int64_t> axes = {{"batch_size", 4}};
  CHECK(BestTrace(traces, "rmsnorm_h16", &axes, 2e-2, 2e-2) == nullptr);
  Named<int64_t> one = {{"batch_size", 1}};
  CHECK(BestTrace(traces, "rmsnorm_h16", &one, 2e-2, 2e-2) == best);

  std::string error;
  auto none = SolutionScores(traces, {{"triton_rmsnorm_dps", "fixture_author"}}, &error);
  CHECK(none.empty());
  CHECK(error.find("no solution by author 'baseline'") != std::string::npos);
  // Make torch_rmsnorm_py the baseline with a PASSED trace twice as slow.
  Trace base = *traces[0];
  base.solution = "torch_rmsnorm_py";
  base.evaluation->performance->latency_ms = 2 * traces[0]->evaluation->performance->latency_ms;
  std::vector<const Trace*> with_base = {traces[0], traces[1], &base};
  auto scores = SolutionScores(with_base, {{"torch_rmsnorm_py", "baseline"}, {"triton_rmsnorm_dps", "x"},
                                           {"wrong_rmsnorm_dps", "x"}}, &error);
  CHECK(scores["triton_rmsnorm_dps"] == Approx(2.0));
  CHECK(scores["wrong_rmsnorm_dps"] == 0.0);  // any failed trace scores 0

  auto pick = AccelOptSelect(set, "rmsnorm_h16", "triton", 10.0);
  REQUIRE(pick);
  CHECK(pick->solution == "triton_rmsnorm_dps");
  CHECK(pick->workload_uuid == "00000000-0000-4000-8000-000000000010");  // the slowest: none above 10 ms
  CHECK_FALSE(AccelOptSelect(set, "rmsnorm_h16", "cuda"));
  std::vector<AccelOptPick> picks = {{"rmsnorm_h128", "a", "s1", 0, 0, 0.3}, {"rmsnorm_h512", "b", "s2", 0, 0, 0.5},
                                     {"fused_add_rmsnorm_h7168", "c", "s3", 0, 0, 0.2}, {"rope_x", "d", "s4", 0, 0, 1}};
  auto groups = AccelOptGroups(picks);
  REQUIRE(groups.size() == 3);
  CHECK(groups[0].definition == "rmsnorm_h512");
  CHECK(groups[1].definition == "fused_add_rmsnorm_h7168");
  CHECK(groups[2].definition == "rope_x");
}

TEST_CASE("flashinfer validate: exit 0 on the fixture, 2 with every problem's file and field", "[flashinfer][cli]") {
  auto ok = RunHost({"flashinfer", "validate", FixtureRoot().string()});
  INFO(ok.output);
  CHECK(ok.exit_code == 0);
  CHECK(ok.output.find("0 errors") != std::string::npos);
  TempDir dir;
  fs::path root = CopyFixture(dir);
  Replace(root / "definitions/rmsnorm/rmsnorm_h16.json", "\"dtype\": \"bfloat16\"", "\"dtype\": \"bfloat15\"");
  Replace(root / "definitions/elementwise/scale_add_n8.json", "\"n >= 1\"", "\"n >>= 1\"");
  auto bad = RunHost({"flashinfer", "validate", root.string()});
  INFO(bad.output);
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("definitions/rmsnorm/rmsnorm_h16.json: inputs.hidden_states.dtype: error: unknown dtype 'bfloat15'") !=
        std::string::npos);
  // The constraint's syntax is checked with Python's ast (the heuristic would accept it).
  CHECK(bad.output.find("definitions/elementwise/scale_add_n8.json: constraints[0]: error: not a valid Python expression") !=
        std::string::npos);
  auto json_out = RunHost({"flashinfer", "validate", root.string(), "--json", "--errors-only"});
  CHECK(json_out.exit_code == 2);
  auto parsed = nlohmann::json::parse(json_out.output.substr(json_out.output.find('{')));
  CHECK(parsed["counts"]["errors"].get<int>() >= 2);
  for (const auto& p : parsed["problems"]) CHECK(p["level"] == "error");
  auto missing = RunHost({"flashinfer", "validate", (dir.path() / "nope").string()});
  CHECK(missing.exit_code == 2);
}
