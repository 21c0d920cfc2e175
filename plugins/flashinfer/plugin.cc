// The `flashinfer` plugin: FlashInfer-Bench trace sets - select traces,
// evaluate solutions as FIB does, summarize (docs/flashinfer.md).
#include "stages.h"

namespace {

constexpr const char* kSelectParams = R"JSON({
  "trace_set": {"type": "string", "required": true, "doc": "FIB trace-set root (definitions/, workloads/, solutions/, traces/, blob/), e.g. a checkout of flashinfer-trace, used unmodified"},
  "definitions": {"type": "array", "default": [], "doc": "definition names to keep (empty: all)"},
  "op_types": {"type": "array", "default": [], "doc": "op_types to keep (empty: all)"},
  "tags": {"type": "array", "default": [], "doc": "tags a definition must all have, e.g. [\"stage:decode\"]"},
  "authors": {"type": "array", "default": [], "doc": "solution authors to evaluate (empty: all)"},
  "languages": {"type": "array", "default": [], "doc": "solution languages to evaluate: python, triton, cuda, cpp, tilelang (empty: all)"},
  "solutions": {"type": "array", "default": [], "doc": "solution names to evaluate (empty: all)"},
  "axes": {"type": "object", "default": {}, "doc": "keep workloads whose var axes equal these values, e.g. {batch_size: 4}"},
  "max_workloads": {"type": "integer", "default": 0, "doc": "first N workloads per definition (0: all)"},
  "mode": {"type": "string", "default": "all", "enum": ["all", "best", "accelopt"], "doc": "all: every matching solution; best: the definition's best existing trace's solution (FIB's get_best_trace); accelopt: AccelOpt's heavy workload and best baseline trace (flashinfer-facts §3.2)"},
  "require_solutions": {"type": "boolean", "default": true, "doc": "leave out definitions without a solution to evaluate"},
  "include_baseline": {"type": "boolean", "default": true, "doc": "also evaluate the definition's `baseline` author solution (for the score vs baseline)"},
  "accelopt_language": {"type": "string", "default": "triton", "doc": "mode accelopt: language of the baseline traces to pick"},
  "accelopt_min_latency_ms": {"type": "number", "default": 10.0, "doc": "mode accelopt: the first workload slower than this (else the slowest)"},
  "accelopt_group": {"type": "boolean", "default": false, "doc": "mode accelopt: keep the largest latency per AccelOpt name-prefix group (its 9 cases)"}
})JSON";

constexpr const char* kSelectOutputs = R"JSON({
  "items": {"type": "array", "doc": "one per definition: definition, op_type, definition_text, trace_set, layout, workloads, solutions, baseline_solution, best_trace"},
  "trace_set": {"type": "string", "doc": "the trace set's absolute root"},
  "layout": {"type": "string", "doc": "current, accelopt, mixed or empty"},
  "skipped": {"type": "array", "doc": "definitions left out and why"},
  "accelopt_picks": {"type": "array", "doc": "mode accelopt: the picked workload and baseline per definition"},
  "problems": {"type": "array", "doc": "objects of the trace set that failed FIB's rules (left out)"}
})JSON";

constexpr const char* kEvaluateParams = R"JSON({
  "item": {"type": "object", "required": true, "doc": "one item of native:select_traces"},
  "solutions": {"type": "array", "default": [], "doc": "Solutions (FIB JSON) to evaluate instead of the item's"},
  "seed": {"type": "integer", "default": 0, "doc": "base of the per-trial input seeds (recorded in every trace)"},
  "trials": {"type": "integer", "default": 3, "doc": "trials on fresh inputs (FIB: num_trials 3)"},
  "warmup": {"type": "integer", "default": 10, "doc": "untimed calls per trial (FIB: warmup_runs 10)"},
  "iterations": {"type": "integer", "default": 50, "doc": "timed calls per trial; the median is the trial's time (FIB: 50)"},
  "cold_cache": {"type": "boolean", "default": true, "doc": "zero twice the last-level cache before every call (FIB flushes 2x L2)"},
  "profile_baseline": {"type": "boolean", "default": true, "doc": "time the reference (else reference_latency_ms and speedup_factor are 0, as FIB's --no-profile-baseline)"},
  "atol": {"type": "number", "default": 0.01, "doc": "absolute tolerance (FIB: 1e-2)"},
  "rtol": {"type": "number", "default": 0.01, "doc": "relative tolerance (FIB: 1e-2)"},
  "required_matched_ratio": {"type": "number", "doc": "share of elements that must match (FIB: 1.0; 0.95 for moe_fp8_block_scale)"},
  "timeout_s": {"type": "number", "default": 300, "doc": "limit per trial call and per build, s (FIB: 300 per evaluation)"},
  "memory_bytes": {"type": "integer", "default": 0, "doc": "address-space limit per trial (0: the pool's cap)"},
  "max_workload_bytes": {"type": "integer", "default": 0, "doc": "cap on what the host holds for one workload (every trial's inputs and reference outputs), checked from the shapes before anything is drawn; over it the workload is skipped with the reason (0: a quarter of RAM, at most 8 GiB)"},
  "isolation": {"type": "string", "default": "worker", "enum": ["worker", "inprocess"], "doc": "worker: sandboxed torch workers (docs/isolation.md); inprocess: trusted solutions only"},
  "static_checks": {"type": "boolean", "default": true, "doc": "the anti-cheat source rules for python solutions (a violation is a COMPILE_ERROR)"},
  "dps_missing": {"type": "string", "default": "auto", "enum": ["auto", "dps", "value"], "doc": "solutions without destination_passing_style: auto (python: the signature; else by layout: accelopt value-returning, current DPS), dps, value"},
  "cuda_arch": {"type": "string", "default": "sm_90a", "doc": "nvcc -arch for cuda/cpp solutions"},
  "traces_dir": {"type": "string", "default": "", "doc": "where traces go as <author>/<op_type>/<definition>.jsonl (default RUN_DIR/traces)"}
})JSON";

constexpr const char* kEvaluateOutputs = R"JSON({
  "ok": {"type": "boolean", "doc": "true (a solution's failure is a trace, not a failed item)"},
  "definition": {"type": "string", "doc": "the definition"},
  "op_type": {"type": "string", "doc": "its op_type"},
  "baseline_solution": {"type": "any", "doc": "the `baseline` author's solution, or null"},
  "results": {"type": "array", "doc": "per (solution, workload): solution, author, language, workload, status, latency_ms (the mean of the trials), reference_latency_ms, speedup_factor, trial_latency_ms (each trial's median, ms), samples_ms (every timed call of the passed trials, ms), log (a failure's log, first 2000 characters)"},
  "skipped": {"type": "array", "doc": "workloads without traces (inputs could not be built, or the reference failed) and why"},
  "not_run": {"type": "array", "doc": "(solution, workload) pairs without a trace and why, e.g. not run: no device"},
  "trace_files": {"type": "array", "doc": "the JSONL files the traces were appended to"},
  "traces": {"type": "integer", "doc": "traces written"},
  "environment": {"type": "object", "doc": "hardware and libs recorded in the traces"}
})JSON";

constexpr const char* kSummaryParams = R"JSON({
  "results": {"type": "any", "required": true, "doc": "outputs of the native:fib_evaluate for_each"},
  "trace_set": {"type": "string", "default": "", "doc": "the trace set (for write_back)"},
  "write_back": {"type": "boolean", "default": false, "doc": "append the run's traces to the trace set's traces/ (FIB's run_all does)"},
  "out_dir": {"type": "string", "doc": "where summary.json and summary.txt go (default: the run directory)"}
})JSON";

constexpr const char* kSummaryOutputs = R"JSON({
  "definitions": {"type": "array", "doc": "per definition: solutions (statuses, speedups, score vs baseline), best_speedup_vs_reference, best_score_vs_baseline, not_run, skipped"},
  "statuses": {"type": "object", "doc": "count of traces per status"},
  "traces": {"type": "integer", "doc": "traces written"},
  "not_run": {"type": "integer", "doc": "(solution, workload) pairs not run"},
  "written_back": {"type": "array", "doc": "trace-set files appended to (write_back)"},
  "text": {"type": "string", "doc": "the summary as text"},
  "summary_json": {"type": "string", "doc": "path of summary.json"}
})JSON";

const std::string kLlm = R"JSON(
  "llm": {"type": "string", "default": "default", "doc": "endpoint name in the pipeline's llm: block"},
  "prompts": {"type": "string", "required": true, "doc": "folder of the FIB prompt templates (prompts/fib)"},
  "language": {"type": "string", "default": "python", "enum": ["python", "triton", "cuda"], "doc": "target language of the candidates (python on CPU; triton or cuda on a GPU)"},
  "max_concurrency": {"type": "integer", "default": 8, "doc": "LLM calls in flight"},
  "seed": {"type": "integer", "default": 0, "doc": "base of the per-call seeds"},
  "temperature": {"type": "number", "doc": "sampling temperature (default: the endpoint's)"},
  "max_tokens": {"type": "integer", "doc": "completion budget (default: the endpoint's)"})JSON";

constexpr const char* kInitParams = R"JSON({
  "pipeline": {"type": "string", "default": "flashinfer-optimize", "doc": "the pipeline's name, as its messages say it (${{ pipeline.name }})"},
  "items": {"type": "any", "required": true, "doc": "native:select_traces outputs (or its items)"},
  "llm": {"type": "string", "default": "default", "doc": "endpoint name; without an available endpoint the stage is a usage error (exit 2)"},
  "language": {"type": "string", "default": "python", "enum": ["python", "triton", "cuda"], "doc": "target language: the start is the item's best solution in it (python: else the reference)"}
})JSON";

const std::string kPlanParams = "{" R"JSON(
  "beam": {"type": "any", "required": true, "doc": "candidates to plan for (native:select's beam, native:mcgs_backprop's frontier or native:agent_step's beam)"},
  "memory": {"type": "any", "doc": "native:memory's memory (experiences appended to the planner's system prompt)"},
  "plans_per_candidate": {"type": "integer", "default": 4, "doc": "BREADTH: plans per candidate"},
  "max_experiences": {"type": "integer", "default": 16, "doc": "newest experiences shown"},
  "iteration": {"type": "integer", "default": 0, "doc": "loop iteration (seeds)"},)JSON" + kLlm + "}";

const std::string kExecuteParams = "{" R"JSON(
  "plans": {"type": "any", "required": true, "doc": "fib_plan's outputs, or the search's selected plans (native:mcgs_select, native:agent_pick: candidate, plan_id, text)"},
  "samples_per_plan": {"type": "integer", "default": 2, "doc": "NUM_SAMPLES: code samples per plan"},
  "model": {"type": "string", "default": "model", "doc": "model name used in candidate names (<model>_<language>_<6 hex>)"},
  "iteration": {"type": "integer", "default": 0, "doc": "loop iteration (ids, seeds)"},)JSON" + kLlm + "}";


const std::string kSummarizeParams = "{" R"JSON(
  "records": {"type": "any", "required": true, "doc": "fib_score's records (speedup and noise vs the parent)"},
  "top_k": {"type": "integer", "default": 8, "doc": "TOPK: rewrites summarized (<= TOPK/2 positive)"},
  "max_threshold": {"type": "number", "default": 1.04, "doc": "a positive rewrite needs speedup > this, and fib_score's noise faster"},
  "min_threshold": {"type": "number", "default": 1.15, "doc": "a negative rewrite needs speedup < 1/this, and fib_score's noise slower"},)JSON" + kLlm + "}";

constexpr const char* kScoreParams = R"JSON({
  "candidates": {"type": "any", "required": true, "doc": "the evaluated candidates: fib_execute's (or native:mcgs_merge_states') candidates, or fib_optimize_init's cases"},
  "results": {"type": "any", "required": true, "doc": "their native:fib_evaluate for_each outputs"},
  "confidence": {"type": "number", "default": 0.95, "doc": "level of the speedup intervals (docs/optimize.md, Noise-aware speedups)"}
})JSON";

constexpr const char* kScoreOutputs = R"JSON({
  "records": {"type": "array", "doc": "the search stages' records: each candidate with status (ok | failed), fib_status, latency_ms, samples_ms, trials_ms, error {kind, message}, speedup, speedup_ci and noise vs its parent, baseline_speedup_ci and baseline_noise, kernel (its entry source as a file), validation"},
  "best": {"type": "object", "doc": "definition -> its fastest passing record here (for the starting solutions: the starting best)"},
  "passed": {"type": "integer", "doc": "records that passed"}
})JSON";

constexpr const char* kReportParams = R"JSON({
  "pipeline": {"type": "string", "default": "flashinfer-optimize", "doc": "the pipeline's name: the report's title (${{ pipeline.name }})"},
  "best": {"type": "any", "required": true, "doc": "native:select's, native:mcgs_backprop's or native:agent_step's best (the loop's carry)"},
  "llm": {"type": "string", "default": "default", "doc": "endpoint whose spend and caps the report shows (docs/llm.md, Spend caps)"}
})JSON";

constexpr const char* kInitOutputs = R"JSON({
  "cases": {"type": "array", "doc": "one per definition: id, case, item (with the starting solution only), solution, parent (null)"},
  "skipped": {"type": "array", "doc": "definitions without a starting solution in the language"},
  "model": {"type": "string", "doc": "the endpoint's model name (candidate names)"},
  "language": {"type": "string", "doc": "the target language"}
})JSON";

constexpr const char* kPlanOutputs = R"JSON({
  "plans": {"type": "array", "doc": "case, parent (the beam candidate), index, plan; and as the search stages read a plan: case_name, candidate (= parent), plan_id, title, text (= plan), origin (llm)"},
  "failures": {"type": "array", "doc": "planner calls that failed or answered nothing"},
  "stopped": {"type": "object", "doc": "definition -> why its LLM spend cap stops it (no plans for it)"},
  "not_sent": {"type": "integer", "doc": "planner calls refused by a spend cap (not sent)"}
})JSON";

constexpr const char* kExecuteOutputs = R"JSON({
  "candidates": {"type": "array", "doc": "id, case, case_name, item (with the candidate as its only solution), solution (FIB JSON), solution_path, kernel (the entry source as a file), parent, parent_solution, parent_latency_ms, parent_trials_ms, parent_samples_ms, plan_index, sample, plan {plan_id, title, index}, plan_text, and the parent's problem and baseline_* fields"},
  "failures": {"type": "array", "doc": "samples without a code block (AccelOpt: No implementation found): id, case, case_name, parent, plan, error {kind: no_code_block | llm_error, message}"},
  "not_sent": {"type": "integer", "doc": "executor calls refused by a spend cap (not sent)"}
})JSON";


constexpr const char* kSummarizeOutputs = R"JSON({
  "items": {"type": "array", "doc": "experience items for native:memory: id, case_name, title, summary, speedup, speedup_original, after"}
})JSON";

constexpr const char* kReportOutputs = R"JSON({
  "cases": {"type": "array", "doc": "definition, baseline_latency_ms, best_latency_ms, speedup, speedup_ci (its interval, or null), noise, solution, file, llm_spend, stopped (a spend cap's reason)"},
  "spend": {"type": "object", "doc": "the LLM endpoint's spend caps and what was spent (run and per definition)"}
})JSON";

const AccelStageDescriptor kStages[] = {
    ACCELOPT_STAGE_WITH_OUTPUTS("fib_optimize_init", "Start AccelOpt's FIB loop: check the LLM (none: usage error, exit 2) and pick each definition's starting solution.",
                   kInitParams, kInitOutputs, accelopt_fib_plugin::RunFibOptimizeInit),
    ACCELOPT_STAGE_WITH_OUTPUTS("fib_plan", "AccelOpt's FIB planner: plans per beam candidate (definition, code, latency, experiences).",
                   kPlanParams.c_str(), kPlanOutputs, accelopt_fib_plugin::RunFibPlan),
    ACCELOPT_STAGE_WITH_OUTPUTS("fib_execute", "AccelOpt's FIB executor: code samples per plan, written as FIB Solutions.",
                   kExecuteParams.c_str(), kExecuteOutputs, accelopt_fib_plugin::RunFibExecute),
    ACCELOPT_STAGE_WITH_OUTPUTS("fib_summarize", "AccelOpt's rewrite selection and summarizer: experience items for native:memory.",
                   kSummarizeParams.c_str(), kSummarizeOutputs, accelopt_fib_plugin::RunFibSummarize),
    ACCELOPT_STAGE_WITH_OUTPUTS("fib_score",
                                "Evaluated FIB candidates as the search stages' records (status, latency, repeats, noise vs parent and baseline), for native:mcgs_* and native:agent_*.",
                                kScoreParams, kScoreOutputs, accelopt_fib_plugin::RunFibScore),
    ACCELOPT_STAGE_WITH_OUTPUTS("fib_optimize_results", "Write optimize_results.json/.md and best/<definition>.json (FIB Solutions).",
                   kReportParams, kReportOutputs, accelopt_fib_plugin::RunFibOptimizeResults),
    ACCELOPT_STAGE_WITH_OUTPUTS("fib_optimize_report", "Former name of fib_optimize_results (kept for older pipelines; warns).",
                   kReportParams, kReportOutputs, accelopt_fib_plugin::RunFibOptimizeReportDeprecated),
    ACCELOPT_STAGE_WITH_OUTPUTS("select_traces",
                                "Pick definitions, workloads and solutions of a FlashInfer-Bench trace set (filters, best trace, baseline author, AccelOpt's selection).",
                                kSelectParams, kSelectOutputs, accelopt_fib_plugin::RunSelectTraces),
    ACCELOPT_STAGE_WITH_OUTPUTS("fib_evaluate",
                                "Evaluate one definition's solutions on its workloads as FlashInfer-Bench does (seeded inputs, FIB's correctness order and timing) and write FIB traces.",
                                kEvaluateParams, kEvaluateOutputs, accelopt_fib_plugin::RunFibEvaluate),
    ACCELOPT_STAGE_WITH_OUTPUTS("fib_summary",
                                "Summarize fib_evaluate results per definition (statuses, speedup vs reference and vs baseline); optionally append the traces to the trace set.",
                                kSummaryParams, kSummaryOutputs, accelopt_fib_plugin::RunFibSummary),
};

}  // namespace

ACCELOPT_EXPORT_PLUGIN("flashinfer", "0.1.0", kStages)
