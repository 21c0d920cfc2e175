// The `profile` plugin: profiling NKI kernels and reporting the results.
#include "accelopt/plugin_sdk.hpp"
#include "profile_stages.h"

namespace {

constexpr const char* kProfileParams = R"JSON({
  "kernel": {"type": "string", "required": true, "doc": "kernel file exposing `kernel` or `optimized_kernel`"},
  "reference": {"type": "string", "required": true, "doc": "NumPy reference module (get_inputs, forward, transform_*)"},
  "backend": {"type": "string", "default": "auto", "enum": ["auto", "emulator", "neuron"], "doc": "auto, emulator or neuron"},
  "target": {"type": "string", "default": "trn1", "enum": ["trn1", "trn2"], "doc": "trn1 or trn2"},
  "rel_tol": {"type": "number", "default": 2e-05, "doc": "pass iff ||out-ref||2 < rel_tol*||ref||2 on every seed"},
  "seeds": {"type": "array", "default": [0, 21, 42, 63, 84], "doc": "NumPy seeds for get_inputs()"},
  "timing": {"type": "boolean", "default": true, "doc": "estimate/measure latency after the correctness check"},
  "case": {"type": "object", "default": {}, "doc": "case metadata carried into the result (problem, values, ...)"},
  "isolation": {"type": "string", "default": "worker", "enum": ["worker", "inprocess"], "doc": "worker (sandboxed process, anti-cheat checks; docs/isolation.md) or inprocess (trusted kernels)"},
  "timeout_s": {"type": "number", "default": 300, "doc": "wall-clock limit per kernel in seconds (worker isolation)"},
  "memory_bytes": {"type": "integer", "default": 0, "doc": "address-space limit per kernel in bytes (worker isolation; 0 = the pool's cap, 3/4 of physical memory)"},
  "screen_seeds": {"type": "integer", "default": 0, "doc": "screen-then-confirm (docs/search.md): N >= 1 checks the first N seeds (plus the hidden set, which is timed) first, and the remaining seeds only when the screened latency is below confirm_below_ms; 0 (or N >= len(seeds)) = every seed in one call"},
  "confirm_below_ms": {"type": "any", "doc": "with screen_seeds: confirm a candidate that passed the screen iff its latency (ms) is strictly below this; null = confirm every candidate that passes the screen"},
  "screen_hidden_only": {"type": "boolean", "default": false, "doc": "with screen_seeds >= 1: the screen runs the hidden input set alone (one emulated run, timed; no published seed) and a confirmation checks every published seed (worker isolation only: in-process, screen_seeds applies)"},
  "hidden_reuse": {"type": "integer", "default": 1, "doc": "calls of the same reference one hidden input set may serve (1..64; worker isolation; docs/isolation.md, R1): 1 = a fresh set for every call; with screen_seeds only the screens share sets, a confirmation always draws a fresh one"},
  "static_checks": {"type": "boolean", "default": true, "doc": "the anti-cheat source rules S1-S4 as a first filter with clear errors (worker isolation); the trusted evaluation does not depend on them (docs/isolation.md)"}
})JSON";

constexpr const char* kReportParams = R"JSON({
  "results": {"type": "any", "required": true, "doc": "outputs of a profile for_each (a list; anything else counts as empty)"},
  "summary": {"type": "string", "doc": "summary text to save as summary.txt"},
  "out_dir": {"type": "string", "doc": "where to write (default: the run directory)"}
})JSON";

constexpr const char* kProfileOutputs = R"JSON({
  "ok": {"type": "boolean", "doc": "the kernel is correct (false counts as a failed item)"},
  "compiled": {"type": "boolean", "doc": "the kernel compiled (or passed the emulator's checks)"},
  "correct": {"type": "boolean", "doc": "within rel_tol of the reference on every seed"},
  "latency_ms": {"type": "any", "doc": "latency in ms (null unless correct)"},
  "estimated": {"type": "boolean", "doc": "latency from the emulator's cost model, not measured"},
  "backend": {"type": "string", "doc": "the backend that ran (emulator or neuron)"},
  "target": {"type": "string", "doc": "trn1 or trn2"},
  "metrics": {"type": "object", "doc": "neuron-profile summary metrics, per-engine busy time, bottleneck"},
  "rel_errors": {"type": "array", "doc": "relative L2 error per seed"},
  "error": {"type": "any", "doc": "null, or {kind, message, traceback}"},
  "peak": {"type": "object", "doc": "% of peak (percent_of_peak, ...) when the problem has a peak model"},
  "case": {"type": "object", "doc": "the `case` parameter, carried through"},
  "wall_s": {"type": "number", "doc": "wall-clock time of the call in seconds"},
  "validation": {"type": "string", "doc": "full (every seed in one call), screened (the first screen_seeds seeds only: never a result) or confirmed (screened, then the remaining seeds)"},
  "validated_seeds": {"type": "array", "doc": "the published seeds the kernel passed (empty when it failed the check it went through)"},
  "screen": {"type": "object", "doc": "with screen_seeds: {seeds, wall_s, timings} of the screening call"},
  "confirm": {"type": "object", "doc": "when confirmed or refused: {seeds, below_ms, correct, wall_s, rel_errors, error, timings} of the confirming call"}
})JSON";

constexpr const char* kReportOutputs = R"JSON({
  "csv": {"type": "string", "doc": "path of profile_results.csv"},
  "json": {"type": "string", "doc": "path of profile_results.json"},
  "summary": {"type": "string", "doc": "path of summary.txt (only with the `summary` parameter)"},
  "total": {"type": "integer", "doc": "kernels in the results"},
  "correct": {"type": "integer", "doc": "correct kernels"},
  "failed": {"type": "integer", "doc": "total - correct"}
})JSON";

const AccelStageDescriptor kStages[] = {
    ACCELOPT_STAGE_WITH_OUTPUTS("profile", "Profile one NKI kernel: 5-seed correctness vs the NumPy reference (or screen-then-confirm), latency and profiler metrics.",
                   kProfileParams, kProfileOutputs, accelopt_profile::RunProfile),
    ACCELOPT_STAGE_WITH_OUTPUTS("profile_results", "Write profile_results.csv (AccelOpt columns), profile_results.json and summary.txt.",
                   kReportParams, kReportOutputs, accelopt_profile::RunProfileResults),
    ACCELOPT_STAGE_WITH_OUTPUTS("profile_report", "Former name of profile_results (kept for older pipelines; warns).",
                   kReportParams, kReportOutputs, accelopt_profile::RunProfileReportDeprecated),
};

}  // namespace

ACCELOPT_EXPORT_PLUGIN("profile", "0.1.0", kStages)
