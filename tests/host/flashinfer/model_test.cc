// FlashInfer-Bench data model (flashinfer/model.h): round trips, defaults,
// unknown keys, every validator rule, the exact trace layout.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "flashinfer/model.h"
#include "flashinfer/safetensors.h"
#include "support/test_support.h"

using namespace accelopt::fib;
using accelopt::testing::SourcePath;

namespace {

std::string Fixture(const std::string& relative) {
  return (SourcePath("tests/fixtures/flashinfer") / relative).string();
}

ojson ReadOrdered(const std::string& path) {
  std::ifstream in(path);
  return ojson::parse(in);
}

std::vector<ojson> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<ojson> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(ojson::parse(line));
  return out;
}

// The problems of parsing and checking `j` as a Definition.
Problems DefinitionProblems(const ojson& j) {
  Problems p;
  auto d = ParseDefinition(j, "def.json", &p);
  if (d) CheckDefinition(*d, HeuristicPython(), "def.json", &p);
  return p;
}

Problems SolutionProblems(const ojson& j) {
  Problems p;
  auto s = ParseSolution(j, "sol.json", &p);
  if (s) CheckSolution(*s, "sol.json", &p);
  return p;
}

Problems TraceProblems(const ojson& j) {
  Problems p;
  auto t = ParseTrace(j, "t.jsonl", &p);
  if (t && t->evaluation) CheckEvaluation(*t->evaluation, "t.jsonl", &p);
  return p;
}

bool Has(const Problems& problems, const std::string& field, const std::string& text) {
  for (const auto& p : problems)
    if (p.field == field && p.message.find(text) != std::string::npos && p.level == Problem::kError) return true;
  std::string all;
  for (const auto& p : problems) all += "\n  " + p.field + ": " + p.message;
  UNSCOPED_INFO("problems:" << all);
  return false;
}

}  // namespace

TEST_CASE("fib model: every fixture definition, solution and trace round-trips", "[flashinfer]") {
  for (const char* file : {"definitions/rmsnorm/rmsnorm_h16.json", "definitions/rmsnorm/fused_add_rmsnorm_h16.json",
                           "definitions/gemm/gemm_n8_k16.json", "definitions/elementwise/scale_add_n8.json"}) {
    INFO(file);
    ojson original = ReadOrdered(Fixture(file));
    Problems p;
    auto d = ParseDefinition(original, file, &p);
    REQUIRE(d);
    CheckDefinition(*d, HeuristicPython(), file, &p);
    REQUIRE(p.empty());
    ojson written = ToJson(*d);
    CHECK(written == original);  // same keys and values (exclude_unset: nothing added)
    auto again = ParseDefinition(ojson::parse(DumpIndented(written)), file, &p);
    REQUIRE(again);
    CHECK(ToJson(*again) == written);
    // Input order is the call order and survives.
    std::vector<std::string> names;
    for (const auto& [name, spec] : again->inputs) names.push_back(name);
    std::vector<std::string> expected;
    for (auto it = original["inputs"].begin(); it != original["inputs"].end(); ++it) expected.push_back(it.key());
    CHECK(names == expected);
  }
  for (const char* file : {"solutions/fixture_author/rmsnorm/rmsnorm_h16/torch_rmsnorm_py.json",
                           "solutions/fixture_author/rmsnorm/rmsnorm_h16/wrong_rmsnorm_dps.json",
                           "solutions/fixture_author/rmsnorm/rmsnorm_h16/triton_rmsnorm_dps.json",
                           "solutions/fixture_author/gemm/gemm_n8_k16/cuda_gemm_naive.json"}) {
    INFO(file);
    ojson original = ReadOrdered(Fixture(file));
    Problems p;
    auto s = ParseSolution(original, file, &p);
    REQUIRE(s);
    CheckSolution(*s, file, &p);
    REQUIRE(p.empty());
    auto again = ParseSolution(ojson::parse(DumpIndented(ToJson(*s))), file, &p);
    REQUIRE(again);
    CHECK(ToJson(*again) == ToJson(*s));
    CHECK(again->Hash() == s->Hash());
  }
  // Traces: every line reads, and writing it gives FIB's full layout back.
  auto lines = ReadLines(Fixture("traces/fixture_author/rmsnorm/rmsnorm_h16.jsonl"));
  REQUIRE(lines.size() == 5);
  std::vector<std::string> statuses;
  for (const auto& line : lines) {
    Problems p;
    auto t = ParseTrace(line, "t", &p);
    REQUIRE(t);
    REQUIRE(t->evaluation);
    CheckEvaluation(*t->evaluation, "t", &p);
    CHECK(p.empty());
    statuses.push_back(t->evaluation->status);
    auto again = ParseTrace(ojson::parse(DumpCompact(ToJson(*t))), "t", &p);
    REQUIRE(again);
    CHECK(DumpCompact(ToJson(*again)) == DumpCompact(ToJson(*t)));
  }
  CHECK(statuses == std::vector<std::string>{"PASSED", "INCORRECT_NUMERICAL", "COMPILE_ERROR", "RUNTIME_ERROR", "TIMEOUT"});
  // Workload traces (solution and evaluation null).
  for (const auto& line : ReadLines(Fixture("workloads/gemm/gemm_n8_k16.jsonl"))) {
    Problems p;
    auto t = ParseTrace(line, "w", &p);
    REQUIRE(t);
    CHECK(t->is_workload());
    auto again = ParseTrace(ToJson(*t), "w", &p);
    REQUIRE(again);
    CHECK(ToJson(again->workload) == ToJson(t->workload));
  }
}

TEST_CASE("fib model: the trace layout is FIB's model_dump_json, non-finite errors as strings", "[flashinfer]") {
  Trace t;
  t.definition = "rmsnorm_h16";
  t.workload.uuid = "u-1";
  t.workload.axes = {{"batch_size", 4}};
  InputDesc random;
  InputDesc scalar;
  scalar.type = "scalar";
  scalar.value = 0.5;
  InputDesc blob;
  blob.type = "safetensors";
  blob.path = "./blob/x.safetensors";
  blob.tensor_key = "A";
  t.workload.inputs = {{"x", random}, {"alpha", scalar}, {"A", blob}};
  t.solution = "s";
  Evaluation e;
  e.status = "INCORRECT_NUMERICAL";
  e.environment.hardware = "CPU: test";
  e.environment.libs = {{"torch", "1.13.0a0"}};
  e.timestamp = "2026-01-01T00:00:00";
  Correctness c;
  c.max_relative_error = NAN;
  c.max_absolute_error = INFINITY;
  e.correctness = c;
  t.evaluation = e;
  CHECK(DumpCompact(ToJson(t)) ==
        R"({"definition":"rmsnorm_h16","workload":{"axes":{"batch_size":4},"inputs":{"x":{"type":"random"},)"
        R"("alpha":{"type":"scalar","value":0.5},"A":{"type":"safetensors","path":"./blob/x.safetensors","tensor_key":"A"}},)"
        R"("uuid":"u-1"},"solution":"s","evaluation":{"status":"INCORRECT_NUMERICAL","environment":{"hardware":"CPU: test",)"
        R"("libs":{"torch":"1.13.0a0"}},"timestamp":"2026-01-01T00:00:00","log":"","correctness":{"max_relative_error":"NaN",)"
        R"("max_absolute_error":"Infinity","extra":null},"performance":null}})");
  // Reading the strings back gives the same values.
  Problems p;
  auto back = ParseTrace(ojson::parse(DumpCompact(ToJson(t))), "t", &p);
  REQUIRE(back);
  CHECK(std::isnan(back->evaluation->correctness->max_relative_error));
  CHECK(std::isinf(back->evaluation->correctness->max_absolute_error));
  CHECK(FloatJson(-INFINITY) == "-Infinity");
  CHECK(DumpCompact(ojson(1.0)) == "1.0");
  CHECK(DumpCompact(ojson(0.0041)) == "0.0041");
}

TEST_CASE("fib model: unknown keys are ignored and defaults applied", "[flashinfer]") {
  ojson s = ReadOrdered(Fixture("solutions/fixture_author/rmsnorm/rmsnorm_h16/torch_rmsnorm_py.json"));
  s["spec"].erase("destination_passing_style");
  s["spec"].erase("dependencies");
  s["future_field"] = {{"x", 1}};
  s["spec"]["also_new"] = true;
  Problems p;
  auto sol = ParseSolution(s, "s", &p);
  REQUIRE(sol);
  CHECK(p.empty());
  CHECK_FALSE(sol->spec.destination_passing_style.has_value());  // FIB's default (true) is the reader's to apply
  CHECK_FALSE(sol->spec.dependencies.has_value());
  CHECK_FALSE(sol->spec.binding.has_value());
  ojson written = ToJson(*sol);
  CHECK_FALSE(written.contains("future_field"));
  CHECK_FALSE(written["spec"].contains("destination_passing_style"));  // left unset, as FIB's exclude_unset
  // A legacy trace without log, correctness fields left at 0.0.
  ojson t = ReadLines(Fixture("traces/fixture_author/rmsnorm/rmsnorm_h16.jsonl"))[0];
  t["evaluation"].erase("log");
  t["evaluation"]["correctness"].erase("max_absolute_error");
  auto trace = ParseTrace(t, "t", &p);
  REQUIRE(trace);
  CHECK(trace->evaluation->log.empty());
  CHECK(trace->evaluation->correctness->max_absolute_error == 0.0);
  // A definition axis without "type": const when it has a value, var otherwise.
  ojson d = ReadOrdered(Fixture("definitions/gemm/gemm_n8_k16.json"));
  d["axes"]["M"].erase("type");
  d["axes"]["N"].erase("type");
  auto def = ParseDefinition(d, "d", &p);
  REQUIRE(def);
  CHECK_FALSE(Find(def->axes, "M")->is_const);
  CHECK(Find(def->axes, "N")->is_const);
  CHECK(def->Tags() == std::vector<std::string>{"status:fixture"});
  CHECK(def->Constraints().empty());
}

TEST_CASE("fib model: every definition rule is reported with its field", "[flashinfer]") {
  const ojson good = ReadOrdered(Fixture("definitions/elementwise/scale_add_n8.json"));
  REQUIRE(DefinitionProblems(good).empty());
  auto with = [&](auto&& edit) {
    ojson j = good;
    edit(j);
    return DefinitionProblems(j);
  };
  CHECK(Has(with([](ojson& j) { j.erase("op_type"); }), "op_type", "field required"));
  CHECK(Has(with([](ojson& j) { j["name"] = ""; }), "name", "non-empty"));
  CHECK(Has(with([](ojson& j) { j["reference"] = 3; }), "reference", "expected a string"));
  CHECK(Has(with([](ojson& j) { j["axes"]["d"] = {{"type", "const"}}; }), "axes.d.value", "field required"));
  CHECK(Has(with([](ojson& j) { j["axes"]["d"]["value"] = -1; }), "axes.d.value", ">= 0"));
  CHECK(Has(with([](ojson& j) { j["axes"]["d"]["type"] = "fixed"; }), "axes.d.type", "const"));
  CHECK(Has(with([](ojson& j) { j["inputs"]["x"]["dtype"] = "float64"; }), "inputs.x.dtype", "unknown dtype"));
  CHECK(Has(with([](ojson& j) { j["inputs"]["x"].erase("shape"); }), "inputs.x.shape", "field required"));
  CHECK(Has(with([](ojson& j) { j["inputs"]["x"]["shape"] = {"n", ""}; }), "inputs.x.shape[1]", "non-empty"));
  CHECK(Has(with([](ojson& j) { j["inputs"]["x"]["shape"] = {"n", "k"}; }), "inputs.x.shape[1]", "'k' is not defined"));
  CHECK(Has(with([](ojson& j) { j["outputs"]["y"]["shape"] = {"q"}; }), "outputs.y.shape[0]", "'q' is not defined"));
  CHECK(Has(with([](ojson& j) { j["outputs"]["x"] = j["outputs"]["y"]; }), "outputs.x", "name of an input"));
  CHECK(Has(with([](ojson& j) { j["reference"] = "import torch\n\ndef forward(x, b, alpha):\n    return x\n"; }),
            "reference", "top-level function named 'run'"));
  CHECK(Has(with([](ojson& j) { j["tags"] = {"ok", ""}; }), "tags[1]", "non-empty"));
  CHECK(Has(with([](ojson& j) { j["constraints"] = {1}; }), "constraints[0]", "expected a string"));
  CHECK(Has(with([](ojson& j) { j["axes"] = ojson::array(); }), "axes", "expected an object"));
  // With a real Python checker (the host's accelopt.fib.syntax), syntax errors are found too.
  PythonSyntax strict = HeuristicPython();
  strict.expression = [](const std::string& s) -> std::optional<std::string> {
    if (s.find(">>=") != std::string::npos) return std::string("invalid syntax");
    return std::nullopt;
  };
  ojson bad = good;
  bad["constraints"] = {"n >>= 1"};
  Problems p;
  auto d = ParseDefinition(bad, "def.json", &p);
  REQUIRE(d);
  CheckDefinition(*d, strict, "def.json", &p);
  CHECK(Has(p, "constraints[0]", "not a valid Python expression"));
}

TEST_CASE("fib model: every solution rule is reported with its field", "[flashinfer]") {
  const ojson good = ReadOrdered(Fixture("solutions/fixture_author/gemm/gemm_n8_k16/cuda_gemm_naive.json"));
  REQUIRE(SolutionProblems(good).empty());
  auto with = [&](auto&& edit) {
    ojson j = good;
    edit(j);
    return SolutionProblems(j);
  };
  CHECK(Has(with([](ojson& j) { j.erase("author"); }), "author", "field required"));
  CHECK(Has(with([](ojson& j) { j["spec"]["language"] = "rust"; }), "spec.language", "must be one of"));
  CHECK(Has(with([](ojson& j) { j["spec"]["target_hardware"] = ojson::array(); }), "spec.target_hardware", "at least 1"));
  CHECK(Has(with([](ojson& j) { j["spec"]["entry_point"] = "kernel.cu:run"; }), "spec.entry_point", "exactly one '::'"));
  CHECK(Has(with([](ojson& j) { j["spec"]["entry_point"] = "a::b::c"; }), "spec.entry_point", "exactly one '::'"));
  CHECK(Has(with([](ojson& j) { j["spec"]["entry_point"] = "main.cu::run"; }), "spec.entry_point", "not among the sources"));
  CHECK(Has(with([](ojson& j) { j["spec"]["binding"] = "pybind"; }), "spec.binding", "tvm-ffi"));
  CHECK(Has(with([](ojson& j) { j["spec"]["destination_passing_style"] = "maybe"; }), "spec.destination_passing_style", "boolean"));
  CHECK(Has(with([](ojson& j) { j["spec"]["dependencies"] = {""}; }), "spec.dependencies[0]", "non-empty"));
  CHECK(Has(with([](ojson& j) { j["sources"] = ojson::array(); }), "sources", "at least 1"));
  CHECK(Has(with([](ojson& j) { j["sources"][0]["content"] = ""; }), "sources[0].content", "non-empty"));
  CHECK(Has(with([](ojson& j) { j["sources"].push_back(j["sources"][0]); }), "sources[1].path", "duplicate"));
  CHECK(Has(with([](ojson& j) { j["sources"].push_back({{"path", "/etc/x.cu"}, {"content", "x"}}); }), "sources[1].path", "relative"));
  CHECK(Has(with([](ojson& j) { j["sources"].push_back({{"path", "a/../../x.cu"}, {"content", "x"}}); }), "sources[1].path", "'..'"));
  CHECK(Has(with([](ojson& j) { j["spec"] = "cuda"; }), "spec", "expected a JSON object"));
}

TEST_CASE("fib model: every trace and evaluation rule is reported with its field", "[flashinfer]") {
  const auto lines = ReadLines(Fixture("traces/fixture_author/rmsnorm/rmsnorm_h16.jsonl"));
  const ojson passed = lines[0], numerical = lines[1], compile = lines[2];
  REQUIRE(TraceProblems(passed).empty());
  auto edit = [](ojson j, auto&& f) {
    f(j);
    return TraceProblems(j);
  };
  CHECK(Has(edit(passed, [](ojson& j) { j["evaluation"].erase("performance"); }), "evaluation.performance", "required when status is PASSED"));
  CHECK(Has(edit(passed, [](ojson& j) { j["evaluation"]["correctness"] = nullptr; }), "evaluation.correctness", "required when status is PASSED"));
  CHECK(Has(edit(numerical, [](ojson& j) { j["evaluation"].erase("correctness"); }), "evaluation.correctness", "required when status is INCORRECT_NUMERICAL"));
  CHECK(Has(edit(numerical, [&](ojson& j) { j["evaluation"]["performance"] = passed["evaluation"]["performance"]; }),
            "evaluation.performance", "must be absent"));
  CHECK(Has(edit(compile, [&](ojson& j) { j["evaluation"]["correctness"] = passed["evaluation"]["correctness"]; }),
            "evaluation.correctness", "must be absent when status is COMPILE_ERROR"));
  CHECK(Has(edit(compile, [&](ojson& j) { j["evaluation"]["performance"] = passed["evaluation"]["performance"]; }),
            "evaluation.performance", "must be absent when status is COMPILE_ERROR"));
  CHECK(Has(edit(passed, [](ojson& j) { j["evaluation"]["status"] = "OK"; }), "evaluation.status", "unknown status"));
  CHECK(Has(edit(passed, [](ojson& j) { j["evaluation"]["performance"]["latency_ms"] = -1; }), "evaluation.performance.latency_ms", ">= 0"));
  CHECK(Has(edit(passed, [](ojson& j) { j["evaluation"]["correctness"]["max_absolute_error"] = -0.5; }),
            "evaluation.correctness.max_absolute_error", "non-negative"));
  CHECK(Has(edit(passed, [](ojson& j) { j["evaluation"]["correctness"]["max_absolute_error"] = "big"; }),
            "evaluation.correctness.max_absolute_error", "expected a number"));
  CHECK(Has(edit(passed, [](ojson& j) { j["evaluation"]["timestamp"] = ""; }), "evaluation.timestamp", "non-empty"));
  CHECK(Has(edit(passed, [](ojson& j) { j["evaluation"]["environment"].erase("hardware"); }), "evaluation.environment.hardware", "field required"));
  CHECK(Has(edit(passed, [](ojson& j) { j["evaluation"]["environment"]["libs"]["torch"] = 2; }), "evaluation.environment.libs.torch", "expected a string"));
  CHECK(Has(edit(passed, [](ojson& j) { j.erase("workload"); }), "workload", "field required"));
  CHECK(Has(edit(passed, [](ojson& j) { j["workload"].erase("uuid"); }), "workload.uuid", "field required"));
  CHECK(Has(edit(passed, [](ojson& j) { j["workload"]["axes"]["batch_size"] = -2; }), "workload.axes.batch_size", ">= 0"));
  CHECK(Has(edit(passed, [](ojson& j) { j["workload"]["axes"]["batch_size"] = 1.5; }), "workload.axes.batch_size", "integer"));
  CHECK(Has(edit(passed, [](ojson& j) { j["workload"]["inputs"]["weight"] = {{"type", "zeros"}}; }), "workload.inputs.weight.type", "random"));
  CHECK(Has(edit(passed, [](ojson& j) { j["workload"]["inputs"]["weight"] = {{"type", "scalar"}}; }), "workload.inputs.weight.value", "field required"));
  CHECK(Has(edit(passed, [](ojson& j) { j["workload"]["inputs"]["weight"] = {{"type", "scalar"}, {"value", "x"}}; }),
            "workload.inputs.weight.value", "int, float or bool"));
  CHECK(Has(edit(passed, [](ojson& j) { j["workload"]["inputs"]["weight"] = {{"type", "safetensors"}, {"path", "a"}}; }),
            "workload.inputs.weight.tensor_key", "field required"));
  CHECK(Has(edit(passed, [](ojson& j) { j["definition"] = ""; }), "definition", "non-empty"));
  // A line prefix says where in a JSONL file.
  Problems p;
  ojson bad = passed;
  bad["evaluation"]["status"] = 7;
  ParseTrace(bad, "t.jsonl", &p, "line 3: ");
  CHECK(Has(p, "line 3: evaluation.status", "expected a string"));
}

TEST_CASE("fib model: workloads against their definition", "[flashinfer]") {
  Problems p;
  auto d = ParseDefinition(ReadOrdered(Fixture("definitions/elementwise/scale_add_n8.json")), "d", &p);
  REQUIRE(d);
  auto w = ParseWorkload(ReadLines(Fixture("workloads/elementwise/scale_add_n8.jsonl"))[0]["workload"], "w", &p);
  REQUIRE(w);
  CheckWorkload(*w, *d, "w", &p);
  REQUIRE(p.empty());
  auto check = [&](auto&& edit) {
    Workload copy = *w;
    edit(copy);
    Problems out;
    CheckWorkload(copy, *d, "w", &out);
    return out;
  };
  CHECK(Has(check([](Workload& x) { x.axes.clear(); }), "workload.axes", "missing var axis 'n'"));
  CHECK(Has(check([](Workload& x) { x.axes.emplace_back("d", 8); }), "workload.axes.d", "not a var axis"));
  CHECK(Has(check([](Workload& x) { x.axes[0].second = 0; }), "workload.axes.n", "> 0"));
  CHECK(Has(check([](Workload& x) { x.inputs.pop_back(); }), "workload.inputs", "missing input 'alpha'"));
  CHECK(Has(check([](Workload& x) { x.inputs.emplace_back("beta", InputDesc{}); }), "workload.inputs.beta", "not an input"));
  CHECK(Has(check([](Workload& x) { x.inputs[2].second = InputDesc{}; }), "workload.inputs.alpha", "expects a scalar"));
  CHECK(Has(check([](Workload& x) { x.inputs[0].second = x.inputs[2].second; }), "workload.inputs.x", "expects a tensor"));
  // Shapes from const axes plus the workload's var values.
  auto shape = d->Shape(*Find(d->inputs, "x"), w->axes);
  REQUIRE(shape);
  CHECK(*shape == std::vector<int64_t>{3, 8});
  std::string missing;
  CHECK_FALSE(d->Shape(*Find(d->inputs, "x"), {}, &missing));
  CHECK(missing == "n");
}

TEST_CASE("fib safetensors: the fixture blob reads as the golden GEMM inputs", "[flashinfer]") {
  auto file = SafetensorsFile::Open(Fixture("blob/workloads/gemm/gemm_n8_k16/gemm_n8_k16_00000000000040008000000000000030.safetensors"));
  REQUIRE(file.tensors.count("A"));
  REQUIRE(file.tensors.count("B"));
  CHECK(file.tensors.at("A").dtype == "F16");
  CHECK(file.tensors.at("A").shape == std::vector<int64_t>{4, 16});
  CHECK(file.tensors.at("B").shape == std::vector<int64_t>{8, 16});
  CHECK(FibDType("F16") == std::optional<std::string>("float16"));
  CHECK(FibDType("BF16") == std::optional<std::string>("bfloat16"));
  CHECK_FALSE(FibDType("U8"));
  auto a = file.Read("A");
  CHECK(a.size() == 4 * 16 * 2);
  // Errors: an LFS pointer, a truncated file, a header that lies.
  accelopt::testing::TempDir dir;
  auto lfs = dir.Write("lfs.safetensors", "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 100\n");
  CHECK_THROWS_WITH(SafetensorsFile::Open(lfs.string()), Catch::Contains("Git-LFS pointer"));
  auto shortfile = dir.Write("short.safetensors", "abc");
  CHECK_THROWS_WITH(SafetensorsFile::Open(shortfile.string()), Catch::Contains("shorter than 8 bytes"));
  std::string header = R"({"A":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}})";
  std::string raw(8, '\0');
  raw[0] = static_cast<char>(header.size());
  auto lying = dir.Write("lying.safetensors", raw + header + std::string(8, '\0'));
  CHECK_THROWS_WITH(SafetensorsFile::Open(lying.string()), Catch::Contains("its shape and dtype need 16"));
}
