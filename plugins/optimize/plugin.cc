// The `optimize` plugin: AccelOpt's plan -> execute -> profile -> select ->
// summarize loop with an optimization memory (docs/optimize.md).
#include <string>

#include "stages.h"

namespace {

const std::string kLlmParams = R"JSON("mode": {"type": "string", "default": "auto", "enum": ["auto", "llm", "rules"], "doc": "llm, rules (accelopt.rules), or auto (llm when the endpoint exists)"},
  "llm": {"type": "string", "default": "default", "doc": "endpoint name in the pipeline's llm: block"},
  "prompts": {"type": "string", "default": "", "doc": "directory of the mustache prompt templates (prompts/)"},
  "max_concurrency": {"type": "integer", "default": 8, "doc": "LLM calls in flight from this stage"},
  "temperature": {"type": "number", "doc": "sampling temperature (default: the endpoint's)"},
  "max_tokens": {"type": "integer", "doc": "completion budget in tokens (default: the endpoint's)"},
  "seed": {"type": "integer", "default": 0, "doc": "base of the per-call seeds (sent as the request's seed)"})JSON";

const std::string kPromptTargetParam = R"JSON("target": {"type": "string", "default": "trn1", "enum": ["trn1", "trn2"], "doc": "the hardware the prompts describe: the partials of prompts/targets/<target>/ (backend.target; docs/prompts.md)"},
  )JSON";

constexpr const char* kInitParams = R"JSON({
  "results": {"type": "any", "required": true, "doc": "outputs of the baseline native:profile for_each (one per case)"},
  "mode": {"type": "string", "default": "auto", "enum": ["auto", "llm", "rules"], "doc": "auto, llm or rules; resolved once here (output `mode`)"},
  "llm": {"type": "string", "default": "default", "doc": "endpoint name in the llm: block"}
})JSON";

const std::string kPlanParams = "{" R"JSON(
  "beam": {"type": "any", "required": true, "doc": "candidates to plan for (list, or select's outputs)"},
  "memory": {"type": "any", "doc": "memory object from native:memory (experiences shown to the planner)"},
  "plans_per_candidate": {"type": "integer", "default": 12, "doc": "N: plans per candidate (LLM calls; rules: proposals)"},
  "max_experiences": {"type": "integer", "default": 16, "doc": "newest experiences shown per prompt"},
  "iteration": {"type": "integer", "default": 0, "doc": "loop iteration (for ids and seeds)"},
  "vocabulary": {"type": "boolean", "default": false, "doc": "LLM mode: the planner picks one move kind of the rule vocabulary (prompts move_planner_*; docs/search.md 'LLM moves'); an unknown kind gives the plan a move_error"},
  "vocabulary_moves": {"type": "integer", "default": 12, "doc": "applicable moves (accelopt.rules.propose) listed in the vocabulary planner's prompt"},
  )JSON" + kPromptTargetParam + kLlmParams + "}";

const std::string kExecuteParams = "{" R"JSON(
  "plans": {"type": "any", "required": true, "doc": "plans (list, or plan's outputs)"},
  "samples_per_plan": {"type": "integer", "default": 2, "doc": "K: code samples per LLM plan (rule plans: 1)"},
  "edit_format": {"type": "string", "default": "source", "enum": ["source", "diff"], "doc": "what the LLM executor is asked for: the full kernel (executor_*) or a unified diff of it (executor_diff_*); either reply is accepted, a diff that does not apply falls back to a full-source block"},
  "iteration": {"type": "integer", "default": 0, "doc": "loop iteration (for ids and seeds)"},
  )JSON" + kPromptTargetParam + kLlmParams + "}";

constexpr const char* kScoreParams = R"JSON({
  "results": {"type": "any", "required": true, "doc": "outputs of the candidates' native:profile for_each"},
  "failures": {"type": "any", "doc": "candidates that never reached profiling (execute's outputs or its `failures` list)"}
})JSON";

const std::string kFixerParams = "{" R"JSON(
  "records": {"type": "any", "required": true, "doc": "scored records (list, or score's outputs)"},
  "rounds": {"type": "integer", "default": 0, "doc": "F: repair rounds per failed candidate; 0 = off (NKI default)"},
  "backend": {"type": "string", "default": "auto", "enum": ["auto", "emulator", "neuron"], "doc": "profiling backend for repaired kernels"},
  "target": {"type": "string", "default": "trn1", "enum": ["trn1", "trn2"], "doc": "trn1 or trn2: the repaired kernels' profiling target and the prompts' (prompts/targets/<target>/)"},
  "timeout_s": {"type": "number", "default": 180, "doc": "profiling time limit per repaired kernel (s; worker pool)"},
  )JSON" + kLlmParams + "}";

constexpr const char* kSelectParams = R"JSON({
  "beam": {"type": "any", "required": true, "doc": "the current beam"},
  "records": {"type": "any", "required": true, "doc": "scored records of this iteration (list, or score/fixer outputs)"},
  "best": {"type": "any", "default": {}, "doc": "case_name -> best kernel so far (elitism)"},
  "beam_width": {"type": "integer", "default": 6, "doc": "B: kernels per problem in the next beam"},
  "confidence": {"type": "number", "default": 0.95, "doc": "timed records (samples_ms, trials_ms: FlashInfer-Bench) replace the best only when faster beyond this level's interval (docs/optimize.md, Noise-aware speedups); deterministic estimates are not affected"},
  "llm": {"type": "string", "default": "default", "doc": "LLM endpoint whose spend caps are checked: a problem at its cap leaves the beam (docs/llm.md, Spend caps)"}
})JSON";

const std::string kSummarizeParams = "{" R"JSON(
  "records": {"type": "any", "required": true, "doc": "scored records (list, or score/fixer outputs)"},
  "top_k": {"type": "integer", "default": 8, "doc": "TopK: experiences per problem and iteration (<= TopK/2 positive)"},
  "max_threshold": {"type": "number", "default": 1.04, "doc": "a positive rewrite needs speedup > max_threshold"},
  "min_threshold": {"type": "number", "default": 1.15, "doc": "a negative rewrite needs speedup < 1/min_threshold"},
  "iteration": {"type": "integer", "default": 0, "doc": "loop iteration (stored in the items)"},
  )JSON" + kPromptTargetParam + kLlmParams + "}";

constexpr const char* kMemoryParams = R"JSON({
  "memory": {"type": "any", "doc": "the memory so far (null: start from `load` or empty)"},
  "load": {"type": "string", "default": "", "doc": "memory.json (or a list of items) to start from when `memory` is null"},
  "add": {"type": "any", "default": [], "doc": "new experience items (list, or summarize's outputs)"},
  "capacity": {"type": "integer", "default": 16, "doc": "ExpN: items kept per problem (scope problem) or in all (shared)"},
  "scope": {"type": "string", "default": "problem", "enum": ["problem", "shared"], "doc": "problem (one memory per case) or shared"},
  "iteration": {"type": "any", "doc": "loop iteration (recorded)"}
})JSON";

constexpr const char* kRenderParams = R"JSON({
  "candidate": {"type": "object", "required": true, "doc": "the kernel to plan for: a beam member (optimize_init's beam entry)"},
  "memory": {"type": "any", "doc": "memory object from native:memory (experiences shown to the planner)"},
  "prompts": {"type": "string", "required": true, "doc": "directory of the mustache prompt templates (prompts/)"},
  "target": {"type": "string", "default": "trn1", "enum": ["trn1", "trn2"], "doc": "the hardware the prompts describe: the partials of prompts/targets/<target>/ (backend.target)"},
  "plans_per_candidate": {"type": "integer", "default": 12, "doc": "N, shown as 'planner 1 of N'"},
  "max_experiences": {"type": "integer", "default": 16, "doc": "newest experiences shown"},
  "plan": {"type": "string", "default": "", "doc": "plan text for the executor prompt (default: a placeholder)"},
  "other": {"type": "any", "doc": "a second kernel {kernel, correct, latency_ms, error}: the fixer's failed kernel, or the summarizer's pair"}
})JSON";

const std::string kRenderOutputs = R"JSON({
  "prompts": {"type": "array", "doc": "one {stage, system, user} per LLM stage: planner, executor, fixer, summarizer"}
})JSON";

const std::string kReflectParams = "{" R"JSON(
  "plans": {"type": "any", "required": true, "doc": "native:agent_pick's outputs (or list): this round's attempt per problem, its parent as `candidate`"},
  "records": {"type": "any", "default": [], "doc": "native:score's outputs for this round's candidates"},
  "failures": {"type": "any", "default": [], "doc": "native:execute's outputs (candidates that never reached profiling)"},
  "best": {"type": "any", "default": {}, "doc": "case_name -> best kernel before this round (the loop's carry.best): an attempt slower than it is reflected on"},
  "iteration": {"type": "integer", "default": 0, "doc": "the round (loop.iteration), shown in the prompt"},
  )JSON" + kPromptTargetParam + kLlmParams + "}";

const std::string kReflectOutputs = R"JSON({
  "reflections": {"type": "object", "doc": "case_name -> {lesson, source: model}: the model's lesson for a failed or slower attempt (feed native:agent_step)"},
  "skipped": {"type": "object", "doc": "case_name -> why the template lesson is kept (no LLM, the call failed, no usable sentence)"},
  "usage": {"type": "object", "doc": "LLM requests, failures, tokens and cost of this stage"}
})JSON";

constexpr const char* kReportParams = R"JSON({
  "baselines": {"type": "any", "required": true, "doc": "optimize_init's baselines (case_name -> baseline)"},
  "best": {"type": "any", "required": true, "doc": "case_name -> best kernel (the loop's carry)"},
  "target": {"type": "string", "default": "trn1", "enum": ["trn1", "trn2"], "doc": "peak model target (trn1, trn2)"},
  "mode": {"type": "string", "default": "", "enum": ["", "llm", "rules"], "doc": "llm or rules (shown in the report)"},
  "out_dir": {"type": "string", "default": "", "doc": "where to write (default: the run directory)"},
  "llm": {"type": "string", "default": "default", "doc": "LLM endpoint whose spend caps and spend the report shows (docs/llm.md, Spend caps)"},
  "evaluated": {"type": "any", "default": null, "doc": "what the search has evaluated so far (e.g. the loop's carry.used or iterations); not read: a change makes `run --resume` write the report again from optimize/records.jsonl"}
})JSON";

// Declared outputs (shown by `accelopt-host stages`, checked by `validate`).
constexpr const char* kUsageDoc = R"JSON("usage": {"type": "object", "doc": "LLM requests, failures, tokens and cost of this stage"})JSON";

const std::string kInitOutputs = R"JSON({
  "beam": {"type": "array", "doc": "the first beam: the baseline kernel of each case"},
  "best": {"type": "object", "doc": "case_name -> best kernel so far (the baselines)"},
  "baselines": {"type": "object", "doc": "case_name -> baseline {kernel, latency_ms, peak, ...}"},
  "mode": {"type": "string", "enum": ["llm", "rules"], "doc": "the mode every later stage uses"},
  "mode_reason": {"type": "string", "doc": "why this mode was chosen"}
})JSON";

const std::string kPlanOutputs = R"JSON({
  "plans": {"type": "array", "doc": "one object per plan (candidate, plan text, id, ...)"},
  "errors": {"type": "array", "doc": "planner calls that failed"},
  "mode": {"type": "string", "doc": "llm or rules"},
  "stopped": {"type": "object", "doc": "case_name -> why its LLM spend cap stops it (no plans for it; docs/llm.md, 'Spend caps')"},
  "not_sent": {"type": "integer", "doc": "planner calls refused by a spend cap (never sent, not errors)"},
  )JSON" + std::string(kUsageDoc) + "}";

const std::string kExecuteOutputs = R"JSON({
  "candidates": {"type": "array", "doc": "kernel files written, one object per sample (id, kernel, reference, lineage, ...)"},
  "failures": {"type": "array", "doc": "samples that produced no kernel, with their error"},
  "stopped": {"type": "object", "doc": "case_name -> why its LLM spend cap stops it (docs/llm.md, 'Spend caps')"},
  "not_sent": {"type": "integer", "doc": "samples not requested because of a spend cap (neither candidates nor failures)"},
  )JSON" + std::string(kUsageDoc) + "}";

const std::string kScoreOutputs = R"JSON({
  "records": {"type": "array", "doc": "one record per candidate: status, error kind, speedups vs parent and baseline"},
  "summary": {"type": "object", "doc": "counts by status"}
})JSON";

const std::string kFixerOutputs = R"JSON({
  "records": {"type": "array", "doc": "the records, repaired candidates updated"},
  "fixed": {"type": "integer", "doc": "candidates repaired"},
  "attempted": {"type": "integer", "doc": "candidates tried"},
  )JSON" + std::string(kUsageDoc) + "}";

const std::string kSelectOutputs = R"JSON({
  "beam": {"type": "array", "doc": "the next beam (B kernels per problem)"},
  "best": {"type": "object", "doc": "case_name -> best kernel so far"},
  "improved": {"type": "any", "doc": "cases whose best improved this iteration"},
  "dropped": {"type": "any", "doc": "candidates dropped as duplicates or as screened only (not confirmed)"},
  "confirm_below_ms": {"type": "object", "doc": "case_name -> latency (ms) a screened candidate must beat to enter the next beam: its slowest member's, for a full beam (absent: any candidate could enter); native:profile's confirm_below_ms"},
  "finished": {"type": "array", "doc": "cases that left the beam: every reply of this iteration repeated an evaluated kernel after a re-ask naming it (the model converged; docs/llm.md, 'Re-asks'), or an LLM spend cap stopped them (`stopped`)"},
  "stopped": {"type": "object", "doc": "case_name -> why its LLM spend cap (or the run's) ended its search: 'spend cap: 500 requests per problem reached (500 spent)' (docs/llm.md, 'Spend caps')"}
})JSON";

const std::string kSummarizeOutputs = R"JSON({
  "items": {"type": "array", "doc": "new experience items (one per selected rewrite)"},
  "selected": {"type": "array", "doc": "the selected slow -> fast rewrites"},
  "errors": {"type": "array", "doc": "summaries that failed"},
  "per_case": {"type": "any", "doc": "the selection log per case"},
  )JSON" + std::string(kUsageDoc) + "}";

const std::string kMemoryOutputs = R"JSON({
  "memory": {"type": "object", "doc": "the memory (feed it to the next memory and plan stages)"},
  "path": {"type": "string", "doc": "memory.json in the run directory"},
  "added": {"type": "integer", "doc": "new items"},
  "duplicates_replaced": {"type": "integer", "doc": "items that replaced an equal older one"},
  "evicted": {"type": "integer", "doc": "items dropped by the capacity"}
})JSON";

const std::string kReportOutputs = R"JSON({
  "rows": {"type": "array", "doc": "one row per problem: original/best latency, speedup, % of peak, kernel, lineage"},
  "geomean_speedup": {"type": "number", "doc": "geometric mean speedup over the problems that ran"},
  "improved": {"type": "integer", "doc": "problems that got faster"},
  "problems": {"type": "integer", "doc": "problems in the report"},
  "llm": {"type": "object", "doc": "LLM requests, tokens and cost of the whole run"},
  "spend": {"type": "object", "doc": "the LLM endpoint's spend caps and what was spent, per run and per problem, with the reason a cap stopped a problem (null without an LLM; docs/llm.md, 'Spend caps')"},
  "target": {"type": "string", "doc": "trn1 or trn2"},
  "mode": {"type": "string", "doc": "llm or rules"},
  "markdown": {"type": "string", "doc": "path of optimize_results.md"},
  "json": {"type": "string", "doc": "path of optimize_results.json"}
})JSON";

using namespace accelopt_optimize;

const AccelStageDescriptor kStages[] = {
    ACCELOPT_STAGE_WITH_OUTPUTS("optimize_init", "Start an optimization: first beam and best-so-far from the baseline profiles; resolves LLM vs rule-based mode.",
                   kInitParams, kInitOutputs.c_str(), RunInit),
    ACCELOPT_STAGE_WITH_OUTPUTS("plan", "Planner: N optimization plans per beam kernel (LLM with memory experiences and profile metrics, or accelopt.rules.propose).",
                   kPlanParams.c_str(), kPlanOutputs.c_str(), RunPlan),
    ACCELOPT_STAGE_WITH_OUTPUTS("execute", "Executor: K kernel samples per plan (first fenced code block of the reply, or accelopt.rules.apply), written with lineage sidecars.",
                   kExecuteParams.c_str(), kExecuteOutputs.c_str(), RunExecute),
    ACCELOPT_STAGE_WITH_OUTPUTS("score", "Candidate records from profile results: status, error kind, speedup vs parent and vs the original baseline.",
                   kScoreParams, kScoreOutputs.c_str(), RunScore),
    ACCELOPT_STAGE_WITH_OUTPUTS("fixer", "Optional repair: up to F LLM rounds (with the error log) for candidates that failed to compile or were wrong.",
                   kFixerParams.c_str(), kFixerOutputs.c_str(), RunFixer),
    ACCELOPT_STAGE_WITH_OUTPUTS("select", "Next beam of B kernels per problem by latency; the best so far always stays; duplicate sources dropped.",
                   kSelectParams, kSelectOutputs.c_str(), RunSelect),
    ACCELOPT_STAGE_WITH_OUTPUTS("summarize", "Rewrite selection (best/worst sample per plan, thresholds, TopK) and one experience item per selected pair.",
                   kSummarizeParams.c_str(), kSummarizeOutputs.c_str(), RunSummarize),
    ACCELOPT_STAGE_WITH_OUTPUTS("memory", "Optimization memory: add experiences (duplicates replaced, newest kept, FIFO capacity ExpN), save memory.json.",
                   kMemoryParams, kMemoryOutputs.c_str(), RunMemory),
    ACCELOPT_STAGE_WITH_OUTPUTS("render_prompts", "Dry run: the planner, executor, fixer and summarizer prompts for one kernel, rendered as the stages would send them, without calling an LLM.",
                   kRenderParams, kRenderOutputs.c_str(), RunRenderPrompts),
    ACCELOPT_STAGE_WITH_OUTPUTS("reflect", "Agent reflexion in LLM mode: after a failed or slower attempt the model writes the lesson (one or two sentences) for native:agent_step; none without an LLM or when the call fails.",
                   kReflectParams.c_str(), kReflectOutputs.c_str(), RunReflect),
    ACCELOPT_STAGE_WITH_OUTPUTS("optimize_results", "Results per problem: original/best latency, speedup, % of peak, winning kernel and lineage, LLM tokens and cost (optimize_results.json/.md).",
                   kReportParams, kReportOutputs.c_str(), RunOptimizeResults),
    ACCELOPT_STAGE_WITH_OUTPUTS("optimize_report", "Former name of optimize_results (kept for older pipelines; warns).",
                   kReportParams, kReportOutputs.c_str(), RunOptimizeReportDeprecated),
};

}  // namespace

ACCELOPT_EXPORT_PLUGIN("optimize", "0.1.0", kStages)
