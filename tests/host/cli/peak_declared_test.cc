// A new NKIBench problem gets its % of peak from peak_work() next to its
// reference, and one without it is warned about, not a silent "-" (issue 36, item 6).
#include <catch2/catch.hpp>

#include <fstream>

#include "support/test_support.h"

using namespace accelopt::testing;
using nlohmann::json;

namespace {

const char* kKernel = R"(import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(M // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, 0:N])
        nl.store(out[i * 128:(i + 1) * 128, 0:N], value=nl.multiply(t, 2.0))
    return out
)";

const char* kReference = R"(import numpy as np

M = 256
N = 512


def get_inputs():
    return [np.random.normal(size=(M, N)).astype(np.float32)]


def forward(x):
    return x * np.float32(2.0)


def transform_to_nki_inputs(inputs):
    return list(inputs)


def transform_nki_outputs(k_res, ref):
    return [np.reshape(k_res, ref.shape)]
)";

const char* kPeakWork = R"(

def peak_work():
    return {"vec_flops": M * N, "mm_flops": 0, "bytes": 4 * 2 * M * N}
)";

// A benchmark folder with one problem, "double", in AccelOpt's format.
std::filesystem::path Bench(TempDir& dir, bool declared) {
  dir.Write("bench/kernels/double_0.py", kKernel);
  dir.Write("bench/reference/double_M256_N512_numpy.py", std::string(kReference) + (declared ? kPeakWork : ""));
  json summary = {{"double", {{"cases", {{"small", {{"values", {{"M", 256}, {"N", 512}}},
                                                     {"impls", json::array({{{"task", "./reference/double_M256_N512_numpy.py"},
                                                                             {"kernel", "./kernels/double_0.py"}}})}}}}}}}};
  dir.Write("bench/summary.json", summary.dump(2));
  return dir.path() / "bench";
}

}  // namespace

TEST_CASE("a problem without a peak model is warned about; peak_work() next to its reference gives its % of peak",
          "[cli][peak][e2e]") {
  TempDir dir;
  auto bench = Bench(dir, false);
  auto run_dir = dir.path() / "run";
  auto run = RunHostWithEnv({"ACCELOPT_NO_PROGRESS=1"}, {"run", SourcePath("pipelines/nkibench-profile.yaml").string(),
                                                         "--set", "vars.nkibench=" + bench.string(), "--set", "vars.cases=small",
                                                         "--run-dir", run_dir.string()});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.output, Catch::Contains("no % of peak for problem 'double'") && Catch::Contains("peak_work()") &&
                             Catch::Contains("nkibench/README.md"));
  // ... and the page says it too (a warning at the top, not a bare "-")
  std::ifstream page(run_dir / "report.html");
  std::string html((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  CHECK_THAT(html, Catch::Contains("no % of peak for problem &#x27;double&#x27;"));

  TempDir declared_dir;
  auto declared = Bench(declared_dir, true);
  auto run_dir2 = declared_dir.path() / "run";
  auto run2 = RunHostWithEnv({"ACCELOPT_NO_PROGRESS=1"}, {"run", SourcePath("pipelines/nkibench-profile.yaml").string(),
                                                          "--set", "vars.nkibench=" + declared.string(), "--set",
                                                          "vars.cases=small", "--run-dir", run_dir2.string()});
  INFO(run2.output);
  REQUIRE(run2.exit_code == 0);
  CHECK_THAT(run2.output, !Catch::Contains("no % of peak"));
  json results = ReadJson(run_dir2 / "profile_results.json");
  REQUIRE(results.size() == 1);
  const json& peak = results[0]["profile"]["peak"];
  INFO(results.dump(2));
  REQUIRE(peak.is_object());
  CHECK(peak["source"] == "reference");
  CHECK(peak["bytes"] == 4 * 2 * 256 * 512);
  CHECK(peak["percent_of_peak"].get<double>() > 0.0);
}
