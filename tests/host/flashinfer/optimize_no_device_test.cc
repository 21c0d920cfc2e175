// flashinfer-optimize in a GPU language on a machine without a GPU (issue 38,
// item 3): nothing it would write can be evaluated, so it stops before asking
// the model anything and exits 2 with the reason, instead of "succeeding" with
// an empty report.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>

#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;
namespace fs = std::filesystem;

TEST_CASE("flashinfer-optimize in triton or cuda without a GPU exits 2 with the reason and asks nothing",
          "[flashinfer][e2e]") {
  if (fs::exists("/dev/nvidia0")) {
    WARN("not checked: this machine has a GPU (/dev/nvidia0)");
    return;
  }
  std::atomic<int> requests{0};
  ScriptedLlmServer server([&](const json&) -> std::string {
    ++requests;
    return "```python\ndef run(x):\n    return x\n```";
  });
  for (const std::string language : {"triton", "cuda"}) {
    INFO(language);
    TempDir dir;
    auto result = RunHost({"run", SourcePath("pipelines/flashinfer-optimize.yaml").string(), "--run-dir",
                           (dir.path() / "run").string(), "--set", "vars.language=" + language, "--set",
                           "vars.definitions=[rmsnorm_h16,gemm_n8_k16]", "--set", "llm.default.base_url=" + server.BaseUrl(),
                           "--set", "llm.default.model=fake-model"});
    INFO(result.output);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.output, Catch::Contains("cannot evaluate any " + language + " solution here") &&
                                  Catch::Contains("no device"));
    CHECK(ReadJson(dir.path() / "run" / "run.json")["status"] != "succeeded");
  }
  CHECK(requests.load() == 0);
}
