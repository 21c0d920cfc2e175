// native:mcgs_priors on hand-built profiles: with `prior: profile` the
// per-engine bottleneck model (accelopt.search.bottleneck) decides which moves
// lead, whatever the proposer's order; `prior: rank` keeps the order; a node
// without busy figures falls back to the rank; an LLM move whose kind is not in
// the vocabulary becomes an invalid edge with its error.
#include <catch2/catch.hpp>

#include <cmath>

#include "host/optimize/optimize_fixture.h"
#include "mcgs_core.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

namespace {

json Graph() {
  json node = {{"id", "n0"}, {"status", "ok"}, {"N", 1}, {"W", 0.0}, {"bottleneck", "vector"}, {"moves_ready", false},
               {"moves", json::array()}};
  return {{"version", 1}, {"round", 0}, {"events", 0}, {"pending_events", json::array()},
          {"tactics", {{"version", 1}, {"entries", json::object()}}},
          {"cases", {{"k", {{"root", "n0"}, {"nodes", {{"n0", node}}}, {"pending", json::array()}}}}}};
}

json Member(const json& metrics) {
  return {{"case_name", "k"}, {"search_node", "n0"}, {"metrics", metrics}};
}

// The proposer's order: a traffic move first, a fusion second, then a refused LLM move.
json Plans(const json& member) {
  return json::array({{{"plan_id", "p0"}, {"rule", "hoist_load"}, {"rule_plan_id", "hoist_load:t@i"}, {"origin", "rules"},
                       {"relieves", {{"dma", 1.0}}}, {"params", {{"site", "t@i"}}}, {"candidate", member}},
                      {{"plan_id", "p1"}, {"rule", "fuse_silu"}, {"rule_plan_id", "fuse_silu:y"}, {"origin", "rules"},
                       {"relieves", {{"vector", 1.0}, {"scalar", 1.0}}}, {"params", {{"site", "y"}}}, {"candidate", member}},
                      {{"plan_id", "p2"}, {"kind", "rewrite_in_cuda"}, {"origin", "llm"}, {"title", "port to CUDA"},
                       {"move_error", {{"kind", "unknown_move"}, {"message", "move kind 'rewrite_in_cuda' is not in the vocabulary"}}},
                       {"candidate", member}}});
}

json Priors(const json& metrics, const std::string& prior, const json& graph = Graph(), const std::string& scope = "problem") {
  TempDir dir;
  const json member = Member(metrics);
  json out = RunStage("mcgs_priors", {{"graph", graph}, {"plans", Plans(member)}, {"frontier", json::array({member})},
                                      {"prior", prior}, {"tactic_weight", 1.0}, {"min_pred_gain", 0.02},
                                      {"tactic_min_count", 3}, {"prune_predicted", false}, {"prune_scope", scope}},
                      dir.path());
  return out["graph"]["cases"]["k"]["nodes"]["n0"];
}

// Case k holds problem silu; hoist_load on VectorE-bound kernels gained nothing in
// 4 tries on rmsnorm and `silu_tries` tries (no gain either) on silu itself.
json GraphWithTactics(int silu_tries) {
  json graph = Graph();
  graph["cases"]["k"]["case"] = {{"problem", "silu"}};
  json problems = {{"rmsnorm", {{"n", 4}, {"improved", 0}, {"failed", 0}, {"log_gain_sum", 0.0}}}};
  if (silu_tries > 0) problems["silu"] = {{"n", silu_tries}, {"improved", 0}, {"failed", 0}, {"log_gain_sum", 0.0}};
  graph["tactics"]["entries"]["hoist_load|vector"] = {
      {"rule", "hoist_load"}, {"bottleneck", "vector"}, {"n", 4 + silu_tries}, {"improved", 0}, {"failed", 0},
      {"log_gain_sum", 0.0}, {"problems", problems}};
  return graph;
}

json Busy(double vector, double dma) {
  return {{"vector_engine_active_time_percent", vector}, {"scalar_engine_active_time_percent", 0.1},
          {"tensor_engine_active_time_percent", 0.0}, {"dma_active_time_percent", dma}};
}

}  // namespace

TEST_CASE("MCGS priors follow the profile's bottleneck per engine", "[search][mcgs][priors]") {
  SECTION("VectorE-bound: the fusion leads although the proposer listed it second") {
    const json node = Priors(Busy(0.9, 0.2), "profile");
    REQUIRE(node["moves"].size() == 3);
    CHECK(node["moves"][1]["prior"].get<double>() > node["moves"][0]["prior"].get<double>());
    CHECK(node["profile_model"]["bottleneck"] == "vector");
    CHECK(node["moves"][1]["kind"] == "fuse_silu");
  }
  SECTION("DMA-bound: the traffic move leads") {
    const json node = Priors(Busy(0.2, 0.9), "profile");
    CHECK(node["moves"][0]["prior"].get<double>() > node["moves"][1]["prior"].get<double>());
    CHECK(node["profile_model"]["bottleneck"] == "dma");
  }
  SECTION("prior: rank keeps the proposer's order; no busy figures fall back to it") {
    for (const json& node : {Priors(Busy(0.9, 0.2), "rank"), Priors(json::object(), "profile")}) {
      CHECK(node["moves"][0]["prior"].get<double>() > node["moves"][1]["prior"].get<double>());
      CHECK(node["moves"][0]["prior"].get<double>() == Approx(2.0 / 3.0));  // 1 : 1/2, normalized
    }
  }
  SECTION("an unknown LLM move kind is an invalid edge with its error, and takes no prior") {
    const json node = Priors(Busy(0.9, 0.2), "profile");
    const json& refused = node["moves"][2];
    CHECK(refused["state"] == "invalid");
    CHECK(refused["kind"] == "rewrite_in_cuda");
    CHECK(refused["error"]["kind"] == "unknown_move");
    CHECK(refused["prior"].get<double>() == 0.0);
    CHECK(node["moves"][0]["prior"].get<double>() + node["moves"][1]["prior"].get<double>() == Approx(1.0));
  }
}

TEST_CASE("MCGS priors prune a move on its own problem's statistics, not on other problems'", "[search][mcgs][priors]") {
  SECTION("nothing on other problems: weighted down, still live on this one") {
    const json node = Priors(Busy(0.9, 0.2), "rank", GraphWithTactics(0));
    CHECK(node["moves"][0]["state"] == "untried");
    CHECK(node["moves"][0]["predicted_gain"].is_null());
    // tactic factor 2 (0+1)/(4+2) = 1/3 on base 1, against 1/2 for the fusion
    CHECK(node["moves"][0]["prior"].get<double>() == Approx((1.0 / 3) / (1.0 / 3 + 0.5)));
  }
  SECTION("nothing on this problem after tactic_min_count tries: pruned") {
    const json node = Priors(Busy(0.9, 0.2), "rank", GraphWithTactics(3));
    CHECK(node["moves"][0]["state"] == "pruned");
    CHECK(node["moves"][0]["predicted_gain"].get<double>() == Approx(0.0));
  }
  SECTION("prune_scope all: other problems' statistics prune too") {
    const json node = Priors(Busy(0.9, 0.2), "rank", GraphWithTactics(0), "all");
    CHECK(node["moves"][0]["state"] == "pruned");
  }
}

TEST_CASE("tactic statistics keep each problem's mean gain", "[search][mcgs][priors]") {
  json tactics;
  accelopt_search::RecordTactic(tactics, "hoist_load", "dma", "silu", true, 1.2);
  accelopt_search::RecordTactic(tactics, "hoist_load", "dma", "silu", false, 0.0);
  accelopt_search::RecordTactic(tactics, "hoist_load", "dma", "mamba", true, 0.9);
  const json& entry = tactics["entries"]["hoist_load|dma"];
  CHECK(entry["n"] == 3);
  CHECK(entry["log_gain_sum"].get<double>() == Approx(std::log(1.2) + std::log(0.9)));
  CHECK(entry["problems"]["silu"]["n"] == 2);
  CHECK(entry["problems"]["silu"]["failed"] == 1);
  CHECK(entry["problems"]["silu"]["log_gain_sum"].get<double>() == Approx(std::log(1.2)));
  CHECK(entry["problems"]["mamba"]["log_gain_sum"].get<double>() == Approx(std::log(0.9)));
  // an entry of an older tactics.json (no per-problem gain) keeps counting and never predicts
  json old = {{"version", 1}, {"entries", {{"hoist_load|dma", {{"rule", "hoist_load"}, {"bottleneck", "dma"}, {"n", 5},
              {"improved", 0}, {"failed", 0}, {"log_gain_sum", 0.0}, {"problems", {{"silu", {{"n", 5}, {"improved", 0}, {"failed", 0}}}}}}}}}};
  accelopt_search::RecordTactic(old, "hoist_load", "dma", "silu", true, 1.1);
  CHECK(old["entries"]["hoist_load|dma"]["problems"]["silu"]["n"] == 6);
  CHECK_FALSE(old["entries"]["hoist_load|dma"]["problems"]["silu"].contains("log_gain_sum"));
  accelopt_search::PriorRule rule;
  CHECK(accelopt_search::PredictionStats(old["entries"]["hoist_load|dma"], "silu", rule)["n"] == 6);
  CHECK_FALSE(accelopt_search::WeighMove(0, std::nullopt, old["entries"]["hoist_load|dma"],
                                         accelopt_search::PredictionStats(old["entries"]["hoist_load|dma"], "silu", rule),
                                         std::nullopt, rule).predicted.has_value());
}
