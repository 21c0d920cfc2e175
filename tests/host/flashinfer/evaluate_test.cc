// pipelines/flashinfer-profile.yaml end to end (select_traces -> fib_evaluate
// -> fib_summary) in sandboxed torch workers: the fixture's statuses, every
// status from a deliberately bad solution, DPS and value-returning solutions,
// the safetensors blob, a scalar input, CUDA builds, write-back.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "flashinfer/cuda_build.h"
#include "flashinfer/trace_set.h"
#include "support/test_support.h"

using namespace accelopt::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

bool HaveTorch() {
  static int have = -1;
  if (have < 0) have = std::system("/usr/bin/python3.11 -c 'import torch' >/dev/null 2>&1") == 0 ? 1 : 0;
  return have == 1;
}

fs::path FixtureRoot() { return SourcePath("tests/fixtures/flashinfer"); }

// (solution, workload uuid) -> evaluation, from every traces/**/*.jsonl under `dir`.
std::map<std::pair<std::string, std::string>, json> ReadTraces(const fs::path& dir) {
  std::map<std::pair<std::string, std::string>, json> out;
  if (!fs::exists(dir)) return out;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".jsonl") continue;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      json t = json::parse(line);
      out[{t["solution"].get<std::string>(), t["workload"]["uuid"].get<std::string>()}] = t["evaluation"];
    }
  }
  return out;
}

std::string Solution(const std::string& name, const std::string& definition, const std::string& code, bool dps,
                     const std::string& language = "python", const std::string& file = "main.py") {
  json s = {{"name", name},
            {"definition", definition},
            {"author", "tests"},
            {"spec", {{"language", language}, {"target_hardware", {"cpu"}}, {"entry_point", file + "::run"},
                      {"destination_passing_style", dps}}},
            {"sources", {{{"path", file}, {"content", code}}}}};
  return s.dump(2);
}

void Put(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("flashinfer-profile: the fixture gives PASSED and INCORRECT_NUMERICAL, CUDA builds, no fake traces",
          "[flashinfer][e2e]") {
  if (!HaveTorch()) {
    WARN(std::string("skipped: ") + "no python3-torch for /usr/bin/python3.11 (scripts/setup.sh installs it)");
    return;
  }
  TempDir dir;
  fs::path run = dir.path() / "run";
  auto result = RunHost({"run", SourcePath("pipelines/flashinfer-profile.yaml").string(), "--run-dir", run.string(),
                         "--set", "vars.trace_set=" + FixtureRoot().string()});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  auto traces = ReadTraces(run / "traces");
  for (const char* uuid : {"00000000-0000-4000-8000-000000000010", "00000000-0000-4000-8000-000000000011",
                           "00000000-0000-4000-8000-000000000012"}) {
    INFO(uuid);
    json passed = traces.at({"torch_rmsnorm_py", uuid});
    CHECK(passed["status"] == "PASSED");
    CHECK(passed["performance"]["latency_ms"].get<double>() > 0);
    CHECK(passed["performance"]["reference_latency_ms"].get<double>() > 0);
    CHECK(passed["performance"]["speedup_factor"].get<double>() ==
          Approx(passed["performance"]["reference_latency_ms"].get<double>() / passed["performance"]["latency_ms"].get<double>()));
    CHECK(passed["correctness"]["extra"]["seeds"].size() == 3);
    CHECK(passed["environment"]["hardware"].get<std::string>().rfind("CPU: ", 0) == 0);
    CHECK(passed["environment"]["libs"].contains("torch"));
    CHECK(passed["log"].get<std::string>().find("warm-up 10 calls, 50 timed calls per trial") != std::string::npos);
    json wrong = traces.at({"wrong_rmsnorm_dps", uuid});
    CHECK(wrong["status"] == "INCORRECT_NUMERICAL");
    CHECK(wrong["performance"].is_null());
    CHECK(wrong["correctness"]["max_absolute_error"].get<double>() > 0.01);
  }
  // FIB's layout, and nothing for the triton and cuda solutions (no device here).
  CHECK(fs::exists(run / "traces/fixture_author/rmsnorm/rmsnorm_h16.jsonl"));
  CHECK_FALSE(traces.count({"triton_rmsnorm_dps", "00000000-0000-4000-8000-000000000010"}));
  CHECK_FALSE(traces.count({"cuda_gemm_naive", "00000000-0000-4000-8000-000000000030"}));
  json summary = ReadJson(run / "summary.json");
  std::string text;
  {
    std::ifstream in(run / "summary.txt");
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // One line per solution not run, with the workloads it missed (issue 36, item 8).
  CHECK(text.find("triton_rmsnorm_dps: not run on 3 workloads:") != std::string::npos);
  if (!accelopt::fib::FindCudaToolkit().nvcc.empty()) {
    CHECK(text.find("cuda_gemm_naive: not run on 2 workloads: built (") != std::string::npos);
    CHECK(text.find("not run: no device") != std::string::npos);
  }
  CHECK(summary["statuses"]["PASSED"] == 3);
  CHECK(summary["statuses"]["INCORRECT_NUMERICAL"] == 3);
  // The traces the run wrote validate as FIB's (a copy of the set with them written back).
  accelopt::fib::TraceSet set = accelopt::fib::LoadTraceSet(FixtureRoot().string());
  TempDir back;
  fs::copy(FixtureRoot(), back.path() / "set", fs::copy_options::recursive);
  auto again = RunHost({"run", SourcePath("pipelines/flashinfer-profile.yaml").string(), "--run-dir",
                        (dir.path() / "run2").string(), "--set", "vars.trace_set=" + (back.path() / "set").string(),
                        "--set", "vars.write_back=true", "--set", "vars.definitions=[rmsnorm_h16]", "--set",
                        "vars.languages=[python]", "--set", "vars.max_workloads=1", "--set", "vars.iterations=3",
                        "--set", "vars.warmup=1", "--set", "vars.cold_cache=false"});
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  auto validated = RunHost({"flashinfer", "validate", (back.path() / "set").string(), "--errors-only"});
  INFO(validated.output);
  CHECK(validated.exit_code == 0);
  auto reloaded = accelopt::fib::LoadTraceSet((back.path() / "set").string());
  CHECK(reloaded.traces.size() == set.traces.size() + 2);
}

TEST_CASE("fib_evaluate: every status from a deliberately bad solution", "[flashinfer][e2e]") {
  if (!HaveTorch()) {
    WARN(std::string("skipped: ") + "no python3-torch for /usr/bin/python3.11");
    return;
  }
  TempDir dir;
  fs::path root = dir.path() / "set";
  fs::copy(FixtureRoot(), root, fs::copy_options::recursive);
  fs::path rms = root / "solutions/tests/rmsnorm/rmsnorm_h16";
  const std::string good = "import torch\n\ndef rms(x, w):\n    x32 = x.float()\n"
                           "    return (x32 * torch.rsqrt(x32.square().mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)\n";
  Put(rms / "ok_dps.json", Solution("ok_dps", "rmsnorm_h16", good + "\ndef run(x, w, out):\n    out.copy_(rms(x, w))\n", true));
  Put(rms / "shape.json", Solution("shape", "rmsnorm_h16", good + "\ndef run(x, w):\n    return rms(x, w)[:, :8]\n", false));
  Put(rms / "dtype.json", Solution("dtype", "rmsnorm_h16", good + "\ndef run(x, w):\n    return rms(x, w).float()\n", false));
  Put(rms / "nan.json", Solution("nan", "rmsnorm_h16", good + "\ndef run(x, w):\n    return rms(x, w) * float('nan')\n", false));
  Put(rms / "raises.json", Solution("raises", "rmsnorm_h16", "def run(x, w):\n    raise ValueError('boom')\n", false));
  Put(rms / "two.json", Solution("two", "rmsnorm_h16", good + "\ndef run(x, w):\n    return rms(x, w), rms(x, w)\n", false));
  Put(rms / "syntax.json", Solution("syntax", "rmsnorm_h16", "def run(x, w):\n    return (\n", false));
  Put(rms / "nosymbol.json", Solution("nosymbol", "rmsnorm_h16", "def forward(x, w):\n    return x\n", false));
  Put(rms / "arity.json", Solution("arity", "rmsnorm_h16", "def run(x):\n    return x\n", false));
  Put(rms / "forbidden.json", Solution("forbidden", "rmsnorm_h16", "import os\n\ndef run(x, w):\n    return x\n", false));
  Put(rms / "spin.json", Solution("spin", "rmsnorm_h16", "def run(x, w):\n    while True:\n        pass\n", false));
  Put(rms / "mutates.json", Solution("mutates", "rmsnorm_h16", good + "\ndef run(x, w):\n    y = rms(x, w)\n    x.mul_(2)\n    return y\n", false));
  Put(rms / "late.json", Solution("late", "rmsnorm_h16",
                                  good + "\ncalls = [0]\n\ndef run(x, w):\n    calls[0] += 1\n    y = rms(x, w)\n"
                                         "    return y if calls[0] == 1 else y * 0\n", false));
  // No destination_passing_style key (FIB's legacy trap): the signature decides (auto).
  json legacy = json::parse(Solution("legacy", "rmsnorm_h16", good + "\ndef run(x, w):\n    return rms(x, w)\n", false));
  legacy["spec"].erase("destination_passing_style");
  Put(rms / "legacy.json", legacy.dump(2));
  // A scalar input (scale_add) and the safetensors blob (gemm), value-returning and DPS.
  Put(root / "solutions/tests/elementwise/scale_add_n8/scale.json",
      Solution("scale", "scale_add_n8", "def run(x, b, alpha):\n    return alpha * x + b\n", false));
  Put(root / "solutions/tests/gemm/gemm_n8_k16/mm.json",
      Solution("mm", "gemm_n8_k16", "import torch\n\ndef run(A, B, C):\n    C.copy_((A.float() @ B.float().T).half())\n", true));
  auto result = RunHost({"run", SourcePath("pipelines/flashinfer-profile.yaml").string(), "--run-dir",
                         (dir.path() / "run").string(), "--set", "vars.trace_set=" + root.string(), "--set",
                         "vars.authors=[tests]", "--set", "vars.max_workloads=1", "--set", "vars.trials=2", "--set",
                         "vars.iterations=3", "--set", "vars.warmup=1", "--set", "vars.cold_cache=false", "--set",
                         "vars.timeout_s=5"});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  auto traces = ReadTraces(dir.path() / "run/traces");
  const std::string u = "00000000-0000-4000-8000-000000000010";
  auto status = [&](const std::string& name, const std::string& uuid) -> std::string {
    auto it = traces.find({name, uuid});
    return it == traces.end() ? "(none)" : it->second["status"].get<std::string>();
  };
  CHECK(status("ok_dps", u) == "PASSED");
  CHECK(status("legacy", u) == "PASSED");
  CHECK(status("shape", u) == "INCORRECT_SHAPE");
  CHECK(status("dtype", u) == "INCORRECT_DTYPE");
  CHECK(status("nan", u) == "INCORRECT_NUMERICAL");
  CHECK(traces.at({"nan", u})["correctness"]["max_absolute_error"] == "NaN");
  CHECK(status("raises", u) == "RUNTIME_ERROR");
  CHECK(traces.at({"raises", u})["log"].get<std::string>().find("ValueError: boom") != std::string::npos);
  CHECK(status("two", u) == "RUNTIME_ERROR");
  CHECK(status("syntax", u) == "COMPILE_ERROR");
  CHECK(status("nosymbol", u) == "COMPILE_ERROR");
  CHECK(status("arity", u) == "COMPILE_ERROR");
  CHECK(status("forbidden", u) == "COMPILE_ERROR");
  CHECK(traces.at({"forbidden", u})["log"].get<std::string>().find("forbidden_import") != std::string::npos);
  CHECK(status("spin", u) == "TIMEOUT");
  CHECK(status("mutates", u) == "RUNTIME_ERROR");
  CHECK(traces.at({"mutates", u})["log"].get<std::string>().find("modified input 'hidden_states'") != std::string::npos);
  CHECK(status("late", u) == "INCORRECT_NUMERICAL");
  CHECK(traces.at({"late", u})["log"].get<std::string>().find("checked after timing") != std::string::npos);
  CHECK(status("scale", "00000000-0000-4000-8000-000000000020") == "PASSED");
  CHECK(status("mm", "00000000-0000-4000-8000-000000000030") == "PASSED");  // the safetensors workload
  // Every trace has FIB's fields for its status.
  for (const auto& [key, evaluation] : traces) {
    INFO(key.first);
    std::string s = evaluation["status"];
    CHECK(evaluation["correctness"].is_null() == !(s == "PASSED" || s == "INCORRECT_NUMERICAL"));
    CHECK(evaluation["performance"].is_null() == (s != "PASSED"));
  }
}

TEST_CASE("fib CUDA build: the fixture's solution compiles against the shim, a broken copy does not", "[flashinfer]") {
  auto kit = accelopt::fib::FindCudaToolkit();
  if (kit.nvcc.empty()) {
    WARN(std::string("skipped: ") + "no CUDA toolkit (nvcc) on this machine");
    return;
  }
  CHECK_FALSE(kit.version.empty());
  accelopt::fib::TraceSet set = accelopt::fib::LoadTraceSet(FixtureRoot().string());
  const accelopt::fib::Solution* s = set.FindSolution("cuda_gemm_naive");
  REQUIRE(s);
  TempDir dir;
  auto built = accelopt::fib::BuildCudaSolution(*s, (dir.path() / "ok").string());
  INFO(built.command << "\n" << built.log);
  CHECK(built.ok);
  CHECK(fs::exists(built.library));
  CHECK(built.symbol == "accelopt_fib_export_run");
  accelopt::fib::Solution broken = *s;
  broken.sources[0].content.replace(broken.sources[0].content.find("C[m * 8 + n]"), 1, "D");
  auto failed = accelopt::fib::BuildCudaSolution(broken, (dir.path() / "bad").string());
  CHECK_FALSE(failed.ok);
  CHECK_FALSE(failed.no_toolkit);
  CHECK(failed.log.find("identifier \"D\" is undefined") != std::string::npos);
  accelopt::fib::Solution unexported = *s;
  auto at = unexported.sources[0].content.find("TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);");
  unexported.sources[0].content.erase(at);
  auto none = accelopt::fib::BuildCudaSolution(unexported, (dir.path() / "none").string());
  CHECK_FALSE(none.ok);
  CHECK(none.log.find("exports no run") != std::string::npos);
}

TEST_CASE("fib CUDA runner: without a driver it says no device", "[flashinfer]") {
  std::string out;
  int rc = accelopt::fib::RunProcess({ACCELOPT_FIB_CUDA_RUNNER_PATH, "--probe"}, 60, &out);
  json probe = json::parse(out);
  if (probe.value("device", false)) {
    WARN(std::string("skipped: ") + "a CUDA device is present: " + probe.value("name", std::string()));
    return;
  }
  CHECK(rc == 3);
  CHECK(probe["status"] == "no_device");
  CHECK_FALSE(probe["message"].get<std::string>().empty());
}

TEST_CASE("flashinfer-profile: a broken CUDA copy is a COMPILE_ERROR trace", "[flashinfer][e2e]") {
  if (!HaveTorch()) {
    WARN(std::string("skipped: ") + "no python3-torch for /usr/bin/python3.11");
    return;
  }
  if (accelopt::fib::FindCudaToolkit().nvcc.empty()) {
    WARN(std::string("skipped: ") + "no CUDA toolkit (nvcc)");
    return;
  }
  TempDir dir;
  fs::path root = dir.path() / "set";
  fs::copy(FixtureRoot(), root, fs::copy_options::recursive);
  json s = ReadJson(root / "solutions/fixture_author/gemm/gemm_n8_k16/cuda_gemm_naive.json");
  s["name"] = "cuda_gemm_broken";
  std::string& code = s["sources"][0]["content"].get_ref<std::string&>();
  code.replace(code.find("__half2float(A["), 1, "");  // an undefined identifier
  Put(root / "solutions/fixture_author/gemm/gemm_n8_k16/cuda_gemm_broken.json", s.dump(2));
  auto result = RunHost({"run", SourcePath("pipelines/flashinfer-profile.yaml").string(), "--run-dir",
                         (dir.path() / "run").string(), "--set", "vars.trace_set=" + root.string(), "--set",
                         "vars.definitions=[gemm_n8_k16]", "--set", "vars.languages=[cuda]"});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  auto traces = ReadTraces(dir.path() / "run/traces");
  for (const char* uuid : {"00000000-0000-4000-8000-000000000030", "00000000-0000-4000-8000-000000000031"}) {
    json e = traces.at({"cuda_gemm_broken", uuid});
    CHECK(e["status"] == "COMPILE_ERROR");
    CHECK(e["log"].get<std::string>().find("nvcc") != std::string::npos);
    CHECK(e["correctness"].is_null());
    CHECK_FALSE(traces.count({"cuda_gemm_naive", uuid}));  // built, not run: no device (no fake trace)
  }
}
