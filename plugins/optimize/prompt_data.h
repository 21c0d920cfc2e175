// plugins/optimize/prompt_data.h - the values the prompt templates (prompts/*.mustache)
// are rendered with, one builder per LLM stage. The stages (plan, execute, fixer,
// summarize) and the dry run (native:render_prompts, `accelopt-host prompts render`)
// call the same builders, so a dry run shows exactly what a model would get.
#pragma once

#include <string>
#include <vector>

#include "common.h"

namespace accelopt_optimize {

/// The profile lines the planner sees: one entry per glossary metric present for
/// `member` (a beam member: `latency_ms` (ms), `metrics` (profile fields, fractions
/// 0-1 for the *_percent ones), optional `peak` (accelopt.peak.describe's object)
/// and `estimated` (bool; also read from metrics.estimated)).
/// `glossary` is prompts/metrics.json: [{"name", "unit", "format", "meaning"}] where
/// format is "ms", "count", "ratio", "fraction" (a 0-1 value shown as %), "share" (a busy
/// fraction of the latency, also shown as a share of the latency minus metrics.launch_ms), "text",
/// "launch" (ms and its share of the latency) or "peak" (from member.peak).
/// Returns [{"name", "text" (value with unit and notes), "unit", "meaning"}] in
/// glossary order; metrics missing from the member are left out.
json DisplayedMetrics(const json& glossary, const json& member);

/// `member` with `metrics.launch_ms` (ms) filled in from accelopt.launch_cost.describe
/// when its latency is an emulator estimate and the profile lacks the field (so the
/// planner sees the fixed launch cost inside the latency); unchanged otherwise, also
/// when the call fails (logged at debug level).
json WithLaunchCost(const StageContext& ctx, json member);

/// The NKI names a kernel source uses: every `nl.x`, `nisa.x`, `nki.x`
/// (also through `nki.language.`/`nki.isa.`) in order of first use, without
/// duplicates, e.g. ["nki.jit", "nl.ndarray", "nl.load", "nisa.activation"].
/// Names inside comments and strings are ignored.
std::vector<std::string> KernelApis(const std::string& source);

/// One memory item as the planner shows it: always oriented slower -> faster.
/// `item` has title, description, before (slower code), after (faster code),
/// speedup (>= 1), direction ("improvement" | "regression"), case_name.
/// Returns {"title", "description", "slower", "faster", "speedup" ("1.155"),
/// "case_name", "regression" (bool), "improvement" (bool)}.
json ExperienceView(const json& item);

/// Template values of planner_system / planner_user for one beam member (reads
/// its `task` (reference) and `kernel` files; throws StageFailure{io_error}).
/// `memory`: native:memory's object; `plans_total`: N. `plan_number` is added
/// per call by the caller.
json PlannerData(const json& member, const json& memory, const json& glossary, int max_experiences, int plans_total);

/// PlannerData's values plus those of move_planner_system / move_planner_user from
/// `vocab` (accelopt.search.vocabulary.describe's reply): "kinds" [{name, effect}],
/// "applicable" [{id, rule, site, description, params (JSON text), gain ("12 %" or
/// false)}], "has_applicable", "bottleneck" ({label, why} or false).
json MovePlannerData(json planner_data, const json& vocab);

/// Template values of executor_user / executor_diff_user for `plan` (whose
/// `candidate` is the parent) applied to `parent_source`; reads the reference file
/// `task`. A plan with a move kind (vocabulary planner, rules) adds "move_kind",
/// "move_effect" and "move_params" (JSON text), else they are false.
json ExecutorData(const json& plan, const std::string& parent_source);

/// Template values of fixer_user for a failed `record` whose kernel source is `code`
/// (record.error: {kind, message, traceback?}); reads the reference file `task`.
json FixerData(const json& record, const std::string& code);

/// Template values of summarizer_user: `slow`/`fast` kernel sources, `speedup` =
/// slow latency / fast latency (> 0), `regression` = the step went fast -> slow.
json SummarizerData(const json& record, const std::string& slow, const std::string& fast, double speedup, bool regression);

}  // namespace accelopt_optimize
