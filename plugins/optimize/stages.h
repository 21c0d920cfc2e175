// plugins/optimize/stages.h - the stages of the `optimize` plugin (the
// plan -> execute -> profile -> select -> summarize loop; docs/optimize.md).
#pragma once

#include "common.h"

namespace accelopt_optimize {

/// native:optimize_init - baseline profiles -> first beam, best-so-far, baselines, LLM mode.
json RunInit(StageContext& ctx);
/// native:plan - N optimization plans per beam candidate (LLM or accelopt.rules.propose).
json RunPlan(StageContext& ctx);
/// native:execute - K kernel samples per plan (LLM or accelopt.rules.apply), written with lineage.
json RunExecute(StageContext& ctx);
/// native:score - profile results -> candidate records with speedups vs parent and baseline.
json RunScore(StageContext& ctx);
/// native:fixer - up to F LLM repair rounds for candidates that failed to compile or were wrong.
json RunFixer(StageContext& ctx);
/// native:select - the next beam: elitist, deduplicated on normalized source.
json RunSelect(StageContext& ctx);
/// native:summarize - rewrite selection + one summary per selected pair -> experience items.
json RunSummarize(StageContext& ctx);
/// native:memory - the optimization memory (capacity, newest kept, duplicates dropped), saved.
json RunMemory(StageContext& ctx);
/// native:render_prompts - dry run: every LLM stage's prompts for one kernel, no model called.
json RunRenderPrompts(StageContext& ctx);
/// native:reflect - the agent loop's lessons written by the model after a failed or slower attempt.
json RunReflect(StageContext& ctx);
/// native:optimize_results - per-problem results of an optimization run (latency, speedup, % of peak,
/// lineage, LLM cost): optimize_results.json/.md, best/<case>.py.
json RunOptimizeResults(StageContext& ctx);
/// native:optimize_report - the former name of native:optimize_results (warns).
json RunOptimizeReportDeprecated(StageContext& ctx);

// Pure parts, shared between stages.

/// Experience items of `memory` visible to a candidate of `case_name` (scope
/// "problem": same case only; "shared": all), oldest first, at most `limit` (newest kept).
json VisibleExperiences(const json& memory, const std::string& case_name, int limit);

/// The lesson in a reflect reply: the prose outside code blocks, without a leading
/// "Lesson:" label, markdown emphasis or extra whitespace, cut after two sentences and at
/// 400 characters; "" when fewer than 8 letters remain (the template lesson is kept).
std::string ReflectionLesson(const std::string& reply);

}  // namespace accelopt_optimize
