// The reflexion agent loop's pure parts (plugins/search/agent_core.cc): the
// divergence guard's threshold, round outcomes, lessons and their rendering.
#include <catch2/catch.hpp>

#include <limits>

#include "agent_core.h"

using namespace accelopt_search;
using nlohmann::json;

TEST_CASE("divergence guard: reverts only above the threshold, strictly, and never without a finite best",
          "[search][agent]") {
  CHECK(*Divergence(1.5, 1.0) == Approx(50.0));
  CHECK_FALSE(ShouldRevert(1.5, 1.0, 50.0));   // exactly 50 %: kept
  CHECK(ShouldRevert(1.5001, 1.0, 50.0));
  CHECK_FALSE(ShouldRevert(1.2, 1.0, 50.0));
  CHECK(ShouldRevert(1.2, 1.0, 10.0));
  CHECK_FALSE(ShouldRevert(100.0, std::numeric_limits<double>::infinity(), 50.0));
  CHECK_FALSE(Divergence(1.0, 0.0).has_value());
}

TEST_CASE("round outcomes: improved, no improvement, divergence revert, failures", "[search][agent]") {
  Outcome o = Judge(true, 0.8, 1.0, 50, "");
  CHECK(o.status == "improved");
  CHECK(o.keep);
  CHECK(o.new_best);
  CHECK(o.category == "improved");
  CHECK(o.lesson == "improved 20.0% (0.80000 vs 1.00000 ms)");  // against the best before the round

  o = Judge(true, 1.0, 1.0, 50, "");  // equal is not better: the best changes only on a strictly lower latency
  CHECK(o.status == "no_improvement");
  CHECK(o.keep);
  CHECK_FALSE(o.new_best);
  CHECK(o.lesson == "no improvement (1.00000 vs 1.00000 ms)");

  o = Judge(true, 1.6, 1.0, 50, "");
  CHECK(o.status == "divergence_revert");
  CHECK_FALSE(o.keep);
  CHECK(o.category == "regression");
  CHECK(o.lesson == "caused 60.0% regression (1.60000 vs 1.00000 ms); reverted to the best");

  o = Judge(false, 0, 1.0, 50, "wrong_result");
  CHECK(o.status == "correctness_fail");
  CHECK(o.category == "error");
  CHECK(o.lesson == "accuracy failed (wrong_result)");
  o = Judge(false, 0, 1.0, 50, "compile_error");
  CHECK(o.status == "compile_fail");
  o = Judge(false, 0, 1.0, 50, "no_code_block");
  CHECK(o.status == "compile_fail");
  CHECK(o.category.empty());  // no lesson when the executor wrote no code
}

TEST_CASE("lessons: plan summaries cut at 100 characters; reflexion over the window with avoid and build-on lists",
          "[search][agent]") {
  const std::string long_plan(150, 'p');
  CHECK(Lesson(3, "x", "improved", long_plan)["plan_summary"].get<std::string>().size() == 100);
  json lessons = json::array({Lesson(0, "improved 10.0% (0.9 vs 1.0 ms)", "improved", "fuse silu"),
                              Lesson(1, "accuracy failed (wrong_result)", "error", "widen j"),
                              Lesson(2, "caused 80.0% regression (1.8 vs 1.0 ms); reverted to the best", "regression", "tile 128"),
                              Lesson(3, "no improvement (1.0 vs 0.9 ms)", "no_improvement", "evict on scalar")});
  const std::string text = RenderReflexion(lessons, 3);
  CHECK(text ==
        "Lessons from the last rounds (reflexion):\n"
        "- [x] round 1: accuracy failed (wrong_result) (plan: widen j)\n"
        "- [-] round 2: caused 80.0% regression (1.8 vs 1.0 ms); reverted to the best (plan: tile 128)\n"
        "- [=] round 3: no improvement (1.0 vs 0.9 ms) (plan: evict on scalar)\n"
        "Avoid:\n"
        "- widen j\n"
        "- tile 128\n");
  const std::string all = RenderReflexion(lessons, 10);
  CHECK_THAT(all, Catch::Contains("- [+] round 0: improved 10.0%"));
  CHECK_THAT(all, Catch::Contains("Build on:\n- fuse silu\n"));
  CHECK(RenderReflexion(json::array(), 3).empty());
}

TEST_CASE("error feedback only after a compile or correctness failure, cut at 500 characters", "[search][agent]") {
  json experiments = json::array({{{"status", "correctness_fail"}, {"error", "wrong_result: " + std::string(600, 'e')}}});
  const std::string feedback = ErrorFeedback(experiments);
  CHECK_THAT(feedback, Catch::StartsWith("The previous attempt failed:\nwrong_result: "));
  CHECK_THAT(feedback, Catch::Contains("do not repeat it"));
  CHECK(feedback.size() < 500 + 120);
  experiments.push_back({{"status", "no_improvement"}, {"error", nullptr}});
  CHECK(ErrorFeedback(experiments).empty());
  CHECK(ErrorFeedback(json::array()).empty());
}

TEST_CASE("avoided moves: a regression or error lesson of the same rule kind on the same kernel", "[search][agent][reflect]") {
  json lessons = json::array({{{"category", "regression"}, {"node", "k1"}, {"move", "retile"}},
                              {{"category", "error"}, {"node", "k2"}, {"move", "fuse_silu"}},
                              {{"category", "no_improvement"}, {"node", "k1"}, {"move", "hoist_load"}},
                              {{"category", "improved"}, {"node", "k1"}, {"move", "fuse_silu"}}});
  CHECK(AvoidedOnNode(lessons, "k1", "retile"));
  CHECK_FALSE(AvoidedOnNode(lessons, "k2", "retile"));     // another kernel
  CHECK(AvoidedOnNode(lessons, "k2", "fuse_silu"));
  CHECK_FALSE(AvoidedOnNode(lessons, "k1", "fuse_silu"));  // improved there
  CHECK_FALSE(AvoidedOnNode(lessons, "k1", "hoist_load"));  // no improvement is not a reason to avoid
  CHECK_FALSE(AvoidedOnNode(lessons, "k1", ""));            // an LLM plan has no move kind
  CHECK_FALSE(AvoidedOnNode(json::array({{{"category", "regression"}, {"move", "retile"}}}), "k1", "retile"));  // lessons of older runs
}
