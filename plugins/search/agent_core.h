// plugins/search/agent_core.h - the reflexion agent loop's pure parts
// (docs/search.md, "Agent"): the divergence guard, attempt outcomes, lessons
// and their rendering for the executor prompt. Without the plugin SDK
// (compiled into the tests as well: tests/host/search/agent_core_test.cc).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace accelopt_search {

using nlohmann::json;

/// Divergence of `latency` from `best` in percent, (new - best) / best * 100;
/// nullopt when there is no finite positive best.
std::optional<double> Divergence(double latency, double best);

/// True when the guard reverts: the divergence exceeds `threshold` percent (strictly).
bool ShouldRevert(double latency, double best, double threshold);

/// The outcome of one round.
struct Outcome {
  std::string status;    ///< improved | no_improvement | correctness_fail | compile_fail | divergence_revert
  bool keep = false;     ///< the candidate becomes the current kernel
  bool new_best = false;  ///< the candidate becomes the best kernel
  std::string category;  ///< the lesson's category: improved | regression | error | no_improvement ("" = no lesson)
  std::string lesson;    ///< the lesson's text
};

/// Judges a candidate against the best so far. `ok`: compiled and correct with a latency;
/// `error_kind`: the failure's kind otherwise (compile/runtime errors are compile_fail, wrong
/// results correctness_fail; no_code_block gives no lesson). Uses the best *before* this round.
Outcome Judge(bool ok, double latency, double best_before, double threshold, const std::string& error_kind);

/// A lesson record: {round, lesson, category, plan_summary (first 100 characters of the plan)}.
json Lesson(int64_t round, const std::string& text, const std::string& category, const std::string& plan);

/// True when a lesson says to avoid `move` on `node`: a regression or error lesson whose
/// `node` (the id of the kernel the attempt started from) is `node` and whose `move` (the
/// rule kind of the attempt, "" for an LLM plan) is `move`. Empty `move`: false. The
/// rules-mode pick skips such a move on that node (docs/search.md, "Reflexion").
bool AvoidedOnNode(const json& lessons, const std::string& node, const std::string& move);

/// The reflexion block over the last `window` lessons: a header, one line per lesson with a
/// category marker, then "Avoid" (plan summaries of regression and error lessons) and
/// "Build on" (of improved lessons), at most 3 each. Empty when there is no lesson.
std::string RenderReflexion(const json& lessons, int window);

/// The error feedback for the executor: the most recent attempt's error (first 500
/// characters) with an instruction to fix it, only when that attempt was a compile or
/// correctness failure; "" otherwise.
std::string ErrorFeedback(const json& experiments);

}  // namespace accelopt_search
