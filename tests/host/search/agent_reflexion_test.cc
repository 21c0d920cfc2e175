// The agent loop's reflexion stages (docs/search.md, "Reflexion"): native:agent_pick
// in rules mode does not take a move kind again on the kernel where a lesson says to
// avoid it (the same rule at another site or with other parameters, which the
// tried-key check alone let through), and native:agent_step stores the model's lesson
// (native:reflect) with source "model", the template's with source "template".
#include <catch2/catch.hpp>

#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

namespace {

json Member(const std::string& id, double latency) {
  return {{"id", id}, {"case_name", "k"}, {"problem", "silu"}, {"latency_ms", latency}};
}

json State(const json& lessons) {
  return {{"cases",
           {{"k",
             {{"current", Member("k0", 1.0)}, {"best", Member("k0", 1.0)}, {"best_latency_ms", 1.0}, {"evaluations", 1},
              {"rounds", 1}, {"no_improve", 0}, {"done", false}, {"lessons", lessons},
              {"tried", json::array({"k0|retile:TILE_N=2048"})}, {"picked", nullptr}, {"experiments", json::array()}}}}},
          {"done", false}};
}

// The proposer's order: retile at another size first, then the fusion.
json Plans() {
  auto plan = [](const std::string& id, const std::string& rule, const std::string& rule_plan_id) {
    return json{{"plan_id", id}, {"rule", rule}, {"rule_plan_id", rule_plan_id}, {"origin", "rules"}, {"title", rule_plan_id},
                {"text", rule_plan_id}, {"candidate", Member("k0", 1.0)}};
  };
  return json::array({plan("p0", "retile", "retile:TILE_N=1024"), plan("p1", "fuse_silu", "fuse_silu:y")});
}

json Pick(const json& lessons, const std::filesystem::path& dir) {
  return RunStage("agent_pick", {{"state", State(lessons)}, {"plans", Plans()}, {"reflexion_window", 3}}, dir);
}

}  // namespace

TEST_CASE("agent pick, rules mode: a move kind a lesson says to avoid on this kernel is not retried there",
          "[search][agent][reflect]") {
  TempDir dir;
  // Without lessons the untried retile (another size) comes first.
  json out = Pick(json::array(), dir.path());
  REQUIRE(out["plans"].size() == 1);
  CHECK(out["plans"][0]["rule_plan_id"] == "retile:TILE_N=1024");
  CHECK(out["state"]["cases"]["k"]["picked"]["node"] == "k0");
  CHECK(out["state"]["cases"]["k"]["picked"]["move"] == "retile");
  CHECK(out["plans"][0]["attempt_text"] == "retile:TILE_N=1024");

  // retile regressed on k0: the other size is skipped there, the fusion is next.
  const json regression = {{"round", 1}, {"lesson", "caused 60% regression"}, {"category", "regression"}, {"plan_summary", "retile"},
                           {"node", "k0"}, {"move", "retile"}, {"source", "template"}};
  out = Pick(json::array({regression}), dir.path());
  REQUIRE(out["plans"].size() == 1);
  CHECK(out["plans"][0]["rule_plan_id"] == "fuse_silu:y");
  CHECK_THAT(out["plans"][0]["text"].get<std::string>(), Catch::Contains("Avoid:\n- retile"));

  // The same lesson from another kernel does not forbid it here.
  json elsewhere = regression;
  elsewhere["node"] = "k7";
  CHECK(Pick(json::array({elsewhere}), dir.path())["plans"][0]["rule_plan_id"] == "retile:TILE_N=1024");
}

TEST_CASE("agent step: the model's lesson replaces the template for a failed attempt; source says who wrote it",
          "[search][agent][reflect]") {
  TempDir dir;
  json state = State(json::array());
  state["cases"]["k"]["picked"] = {{"key", "k0|retile:TILE_N=1024"}, {"summary", "retile"}, {"node", "k0"}, {"move", "retile"}};
  const json failed = {{"case_name", "k"}, {"id", "c1"}, {"status", "failed"}, {"compiled", false},
                       {"error", {{"kind", "compile_error"}, {"message", "bad"}}}};
  auto step = [&](const json& reflections) {
    json with = {{"state", state}, {"records", json::array({failed})}, {"failures", json::array()}, {"iteration", 2},
                 {"divergence_threshold", 50.0}, {"no_improve_limit", 5}, {"budget", 40}};
    if (!reflections.is_null()) with["reflections"] = reflections;
    return RunStage("agent_step", with, dir.path())["state"]["cases"]["k"]["lessons"].back();
  };
  json lesson = step({{"k", {{"lesson", "TILE_N=1024 overflows a PSUM bank. Keep 512."}, {"source", "model"}}}});
  CHECK(lesson["lesson"] == "TILE_N=1024 overflows a PSUM bank. Keep 512.");
  CHECK(lesson["source"] == "model");
  CHECK(lesson["category"] == "error");
  CHECK(lesson["node"] == "k0");
  CHECK(lesson["move"] == "retile");
  const json written = ReadJson(dir.path() / "lessons.json");
  CHECK(written["cases"]["k"].back()["source"] == "model");

  for (const json& none : {json(), json::object(), json::array()}) {
    lesson = step(none);
    CHECK(lesson["lesson"] == "failed to compile or run (compile_error)");
    CHECK(lesson["source"] == "template");
  }
}
