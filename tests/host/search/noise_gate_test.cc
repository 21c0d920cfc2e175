// The search stages judge timed records against their measured noise
// (accelopt/sdk/noise.hpp; docs/optimize.md, "Noise-aware speedups"): a
// FlashInfer-Bench candidate whose gain is within the interval of its timed
// calls never becomes the incumbent (native:mcgs_backprop) or the best
// (native:agent_step); one faster beyond it does; a deterministic estimate (the
// NKI emulator's, no repeats) keeps the min_gain rule alone.
#include <catch2/catch.hpp>

#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

namespace {

// Repeats around `center` (ms) with a spread of about +-20 %.
json Noisy(double center) { return json::array({center * 0.8, center * 1.2, center * 0.9, center * 1.1, center, center * 1.15, center * 0.85}); }

// One problem whose root n0 (1.0 ms) has one evaluated move to the pending node n1.
json GraphWithPendingChild(bool timed) {
  json n0 = {{"id", "n0"}, {"status", "ok"}, {"latency_ms", 1.0}, {"N", 1}, {"W", 0.0}, {"depth", 0}, {"parent", nullptr},
             {"moves_ready", true}, {"bottleneck", "unknown"},
             {"moves", json::array({{{"id", "n0p0"}, {"rule", "llm"}, {"state", "expanded"}, {"child", "n1"}, {"n", 0}}})}};
  if (timed) n0["samples_ms"] = Noisy(1.0);
  json n1 = {{"id", "n1"}, {"status", "pending"}, {"N", 0}, {"W", 0.0}, {"depth", 1}, {"parent", "n0"}, {"moves_ready", false},
             {"moves", json::array()}};
  json cg = {{"case", {{"case_name", "rmsnorm"}, {"problem", "rmsnorm"}, {"baseline_latency_ms", 1.0}}},
             {"root", "n0"}, {"next_id", 2}, {"evaluations", 0}, {"incumbent", "n0"}, {"done", false},
             {"pending", json::array({{{"plan_id", "n0p0"}, {"node", "n0"}, {"move", 0}, {"path", {"n0"}}, {"outcome", "new"}, {"child", "n1"}}})},
             {"nodes", {{"n0", n0}, {"n1", n1}}}};
  return {{"version", 1}, {"round", 0}, {"done", false}, {"events", 0}, {"pending_events", json::array()},
          {"tactics", {{"version", 1}, {"entries", json::object()}}}, {"cases", {{"rmsnorm", cg}}}};
}

json Record(double latency, const json& samples) {
  json r = {{"id", "cand"}, {"case_name", "rmsnorm"}, {"search_node", "n1"}, {"status", "ok"}, {"latency_ms", latency},
            {"validation", "full"}};
  if (!samples.is_null()) r["samples_ms"] = samples;
  return r;
}

}  // namespace

TEST_CASE("mcgs_backprop: a timed gain within the noise is no new incumbent; one beyond it is", "[search][mcgs][noise]") {
  TempDir dir;
  SECTION("within the noise") {
    json out = RunStage("mcgs_backprop", {{"graph", GraphWithPendingChild(true)}, {"records", json::array({Record(0.93, Noisy(0.93))})},
                                          {"budget", 10}},
                        dir.path());
    const json& cg = out["graph"]["cases"]["rmsnorm"];
    CHECK(cg["incumbent"] == "n0");
    CHECK(cg["nodes"]["n1"]["noise_vs_incumbent"] == "within");
    CHECK(cg["nodes"]["n1"]["status"] == "ok");  // still a search state
    CHECK(out["best"].empty());
  }
  SECTION("beyond the noise") {
    json fast = json::array({0.50, 0.51, 0.49, 0.50, 0.52, 0.48, 0.50});
    json out = RunStage("mcgs_backprop", {{"graph", GraphWithPendingChild(true)}, {"records", json::array({Record(0.50, fast)})},
                                          {"budget", 10}},
                        dir.path());
    const json& cg = out["graph"]["cases"]["rmsnorm"];
    CHECK(cg["incumbent"] == "n1");
    CHECK(cg["nodes"]["n1"]["samples_ms"] == fast);  // the noise the next incumbent must beat
    CHECK(out["best"]["rmsnorm"]["latency_ms"] == 0.50);
  }
  SECTION("one timed call is unmeasured: no new incumbent") {
    json out = RunStage("mcgs_backprop", {{"graph", GraphWithPendingChild(true)}, {"records", json::array({Record(0.10, json::array({0.10}))})},
                                          {"budget", 10}},
                        dir.path());
    CHECK(out["graph"]["cases"]["rmsnorm"]["incumbent"] == "n0");
    CHECK(out["graph"]["cases"]["rmsnorm"]["nodes"]["n1"]["noise_vs_incumbent"] == "unmeasured");
  }
  SECTION("deterministic estimates keep the min_gain rule") {
    json out = RunStage("mcgs_backprop", {{"graph", GraphWithPendingChild(false)}, {"records", json::array({Record(0.93, json())})},
                                          {"budget", 10}},
                        dir.path());
    CHECK(out["graph"]["cases"]["rmsnorm"]["incumbent"] == "n1");
  }
}

TEST_CASE("agent_step: a timed gain within the noise is no new best, only the next starting point", "[search][agent][noise]") {
  TempDir dir;
  json best = {{"id", "start"}, {"case_name", "rmsnorm"}, {"latency_ms", 1.0}, {"baseline_latency_ms", 1.0}, {"samples_ms", Noisy(1.0)}};
  json state = {{"done", false},
                {"cases", {{"rmsnorm", {{"current", best}, {"best", best}, {"best_latency_ms", 1.0}, {"evaluations", 0}, {"rounds", 0},
                                        {"no_improve", 0}, {"done", false}, {"lessons", json::array()}, {"tried", json::array()},
                                        {"experiments", json::array()},
                                        {"picked", {{"key", "start|p"}, {"summary", "vectorize"}, {"node", "start"}, {"move", ""}}}}}}}};
  json with = {{"state", state}, {"records", json::array({Record(0.93, Noisy(0.93))})}, {"failures", json::array()}, {"iteration", 0},
               {"budget", 10}};
  json out = RunStage("agent_step", with, dir.path());
  const json& c = out["state"]["cases"]["rmsnorm"];
  CHECK(c["best"]["id"] == "start");
  CHECK(c["current"]["id"] == "cand");
  CHECK(c["experiments"][0]["status"] == "no_improvement");
  CHECK(c["lessons"][0]["lesson"].get<std::string>().find("within the measured noise") != std::string::npos);

  // The same record beyond the noise is the new best.
  with["records"] = json::array({Record(0.5, json::array({0.50, 0.51, 0.49, 0.50, 0.52, 0.48, 0.50}))});
  out = RunStage("agent_step", with, dir.path());
  CHECK(out["state"]["cases"]["rmsnorm"]["best"]["id"] == "cand");
  CHECK(out["state"]["cases"]["rmsnorm"]["experiments"][0]["status"] == "improved");
}
