// native:mcgs_merge_states and its former name native:mcgs_transpose (issue 40: "transpose"
// read as a matrix transpose). Both names run the same stage, so older pipelines keep working.
#include <catch2/catch.hpp>

#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

TEST_CASE("mcgs_merge_states: the former name mcgs_transpose runs the same stage", "[search][mcgs]") {
  TempDir dir;
  // A graph with one case and a pending move that produced no kernel: both names drop it alike.
  json graph = {{"cases",
                 {{"silu",
                   {{"pending", json::array({{{"plan_id", "p1"}, {"node", "n0"}, {"move", 0}}})},
                    {"nodes", {{"n0", {{"moves", json::array({{{"id", "m1"}, {"state", "pending"}}})}}}}}}}}}};
  json execute = {{"candidates", json::array()},
                  {"failures", json::array({{{"case_name", "silu"}, {"plan", {{"plan_id", "p1"}}}, {"error", {{"kind", "rule_error"}}}}})}};
  json merged = RunStage("mcgs_merge_states", {{"graph", graph}, {"execute", execute}}, dir.path() / "a");
  json former = RunStage("mcgs_transpose", {{"graph", graph}, {"execute", execute}}, dir.path() / "b");
  CHECK(merged == former);
  CHECK(merged["candidates"].empty());
  CHECK(merged["invalid"] == 1);
  CHECK(merged["graph"]["cases"]["silu"]["nodes"]["n0"]["moves"][0]["state"] == "invalid");
}
