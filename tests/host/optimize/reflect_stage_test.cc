// native:reflect (docs/search.md, "Reflexion"): after a failed or slower attempt
// the model is asked for the lesson; its reply becomes the reflection, a failed call
// (an HTTP 503 after the host's retries), an empty or code-only reply, an improvement
// and rules mode give none (native:agent_step then keeps its template lesson).
#include <catch2/catch.hpp>

#include "core/errors.h"
#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

namespace {

json Parent() {
  return {{"id", "silu_M256_N1024_ID0"}, {"problem", "silu"}, {"case_name", "silu_M256_N1024"}, {"latency_ms", 0.04}};
}

json Plan() {
  return {{"plan_id", "ab0p0"}, {"text", "Tile 2048 columns\n\nLessons from the last rounds (reflexion):\n- old"},
          {"attempt_text", "Tile 2048 columns"}, {"candidate", Parent()}};
}

json Slower() {
  return {{"id", "c1"}, {"case_name", "silu_M256_N1024"}, {"problem", "silu"}, {"status", "ok"}, {"latency_ms", 0.05},
          {"diff", "--- a/kernel.py\n+++ b/kernel.py\n@@ -1 +1 @@\n-TILE_N = 512\n+TILE_N = 2048\n"}};
}

json Reflect(const json& record, const std::string& mode, const std::filesystem::path& dir) {
  return RunStage("reflect", {{"plans", json::array({Plan()})}, {"records", json::array({record})}, {"failures", json::array()},
                              {"best", {{"silu_M256_N1024", Parent()}}}, {"iteration", 3}, {"mode", mode},
                              {"prompts", SourcePath("prompts").string()}, {"max_concurrency", 1}},
                  dir);
}

}  // namespace

TEST_CASE("reflect: a slower attempt gets the model's lesson, asked with the plan, the diff and the outcome", "[optimize][llm][reflect]") {
  TempDir dir;
  ScopedLlm llm([](const json&) {
    return Reply("**Lesson:** 2048-column tiles left too few buffers to overlap loads with compute. Keep 512 columns. "
                 "A third sentence is cut.\n```python\nTILE_N = 512\n```");
  });
  json out = Reflect(Slower(), "llm", dir.path());
  REQUIRE(llm.Requests().size() == 1);
  const std::string system = llm.Requests()[0]["messages"][0]["content"];
  const std::string user = llm.Requests()[0]["messages"][1]["content"];
  CHECK_THAT(system, Catch::Contains("one or two plain sentences"));
  CHECK_THAT(user, Catch::Contains("Tile 2048 columns") && Catch::Contains("+TILE_N = 2048") &&
                       Catch::Contains("slower than the best kernel so far (0.04 ms, 25.0 % slower)"));
  CHECK(user.find("Lessons from the last rounds") == std::string::npos);  // the plan without the pick's context
  CHECK(out["reflections"]["silu_M256_N1024"]["lesson"] ==
        "2048-column tiles left too few buffers to overlap loads with compute. Keep 512 columns.");
  CHECK(out["reflections"]["silu_M256_N1024"]["source"] == "model");
  CHECK(out["usage"]["total"]["requests"] == 1);
}

TEST_CASE("reflect: a failed call, an empty or code-only reply leave the template lesson", "[optimize][llm][reflect]") {
  TempDir dir;
  SECTION("HTTP 503") {
    ScopedLlm llm([](const json&) -> json { throw accelopt::StageError("llm_server", "HTTP 503: overloaded"); });
    json out = Reflect(Slower(), "llm", dir.path());
    CHECK(out["reflections"].empty());
    CHECK_THAT(out["skipped"]["silu_M256_N1024"].get<std::string>(), Catch::Contains("503") && Catch::Contains("template"));
  }
  SECTION("empty and code-only replies") {
    for (const char* reply : {"", "```python\nTILE_N = 512\n```"}) {
      ScopedLlm llm([reply](const json&) { return Reply(reply); });
      json out = Reflect(Slower(), "llm", dir.path());
      CHECK(llm.Requests().size() == 1);
      CHECK(out["reflections"].empty());
      CHECK_THAT(out["skipped"]["silu_M256_N1024"].get<std::string>(), Catch::Contains("no usable sentence"));
    }
  }
}

TEST_CASE("reflect: a failed attempt shows its error; improvements, rules mode and untried replies ask nothing",
          "[optimize][llm][reflect]") {
  TempDir dir;
  ScopedLlm llm([](const json&) { return Reply("Mixed indexing does not compile. Use slices on both axes."); });
  json failed = {{"id", "c1"}, {"case_name", "silu_M256_N1024"}, {"status", "failed"},
                 {"error", {{"kind", "compile_error"}, {"message", "[err_unsupported_mixing_basic_advanced_tensor_indexing] x"}}}};
  json out = Reflect(failed, "llm", dir.path());
  REQUIRE(llm.Requests().size() == 1);
  CHECK_THAT(llm.Requests()[0]["messages"][1]["content"].get<std::string>(),
             Catch::Contains("it failed (compile_error)") && Catch::Contains("err_unsupported_mixing"));
  CHECK(out["reflections"]["silu_M256_N1024"]["lesson"] == "Mixed indexing does not compile. Use slices on both axes.");

  json faster = Slower();
  faster["latency_ms"] = 0.03;
  CHECK(Reflect(faster, "llm", dir.path())["reflections"].empty());
  json unchanged = {{"case_name", "silu_M256_N1024"}, {"status", "failed"}, {"error", {{"kind", "unchanged"}, {"message", "same"}}}};
  CHECK(Reflect(unchanged, "llm", dir.path())["reflections"].empty());
  json rules = Reflect(Slower(), "rules", dir.path());
  CHECK(rules["reflections"].empty());
  CHECK_THAT(rules["skipped"]["silu_M256_N1024"].get<std::string>(), Catch::Contains("no LLM"));
  CHECK(llm.Requests().size() == 1);
}
