// native:profile_results and its former name native:profile_report (issue 40: "report"
// is the run's HTML report). Both names run the same stage, so older pipelines keep working.
#include <catch2/catch.hpp>

#include "host/optimize/optimize_fixture.h"

using namespace accelopt::testing;
using namespace accelopt::testing::optimize;
using nlohmann::json;

TEST_CASE("profile_results: the former name profile_report writes the same results", "[profile]") {
  TempDir dir;
  const json results = json::array({{{"ok", true}, {"compiled", true}, {"correct", true}, {"latency_ms", 1.25},
                                     {"case", {{"case_name", "silu_M256_N1024"}, {"problem", "silu"}}}}});
  json now = RunStage("profile_results", {{"results", results}}, dir.path() / "a");
  json former = RunStage("profile_report", {{"results", results}}, dir.path() / "b");
  CHECK(now["total"] == 1);
  CHECK(now["total"] == former["total"]);
  CHECK(now["correct"] == former["correct"]);
  CHECK(ReadFile(now["csv"].get<std::string>()) == ReadFile(former["csv"].get<std::string>()));
}
