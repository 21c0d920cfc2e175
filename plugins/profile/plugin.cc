// The `profile` plugin: profiling NKI kernels and reporting the results.
#include "accelopt/plugin_sdk.hpp"
#include "profile_stages.h"

namespace {

constexpr const char* kProfileParams = R"JSON({
  "kernel": {"type": "string", "required": true, "doc": "kernel file exposing `kernel` or `optimized_kernel`"},
  "reference": {"type": "string", "required": true, "doc": "NumPy reference module (get_inputs, forward, transform_*)"},
  "backend": {"type": "string", "default": "auto", "doc": "auto, emulator or neuron"},
  "target": {"type": "string", "default": "trn1", "doc": "trn1 or trn2"},
  "rel_tol": {"type": "number", "default": 2e-05, "doc": "pass iff ||out-ref||2 < rel_tol*||ref||2 on every seed"},
  "seeds": {"type": "array", "default": [0, 21, 42, 63, 84], "doc": "NumPy seeds for get_inputs()"},
  "timing": {"type": "boolean", "default": true, "doc": "estimate/measure latency after the correctness check"},
  "case": {"type": "object", "default": {}, "doc": "case metadata carried into the result (problem, values, ...)"},
  "isolation": {"type": "string", "default": "worker", "doc": "worker (sandboxed process, anti-cheat checks; docs/isolation.md) or inprocess (trusted kernels)"},
  "timeout_s": {"type": "number", "default": 300, "doc": "wall-clock limit per kernel in seconds (worker isolation)"},
  "memory_bytes": {"type": "integer", "default": 0, "doc": "address-space limit per kernel in bytes (worker isolation; 0 = the pool's cap, 3/4 of physical memory)"}
})JSON";

constexpr const char* kReportParams = R"JSON({
  "results": {"type": "any", "required": true, "doc": "outputs of a profile for_each (a list; anything else counts as empty)"},
  "summary": {"type": "string", "doc": "summary text to save as summary.txt"},
  "out_dir": {"type": "string", "doc": "where to write (default: the run directory)"}
})JSON";

const AccelStageDescriptor kStages[] = {
    ACCELOPT_STAGE("profile", "Profile one NKI kernel: 5-seed correctness vs the NumPy reference, latency and profiler metrics.",
                   kProfileParams, accelopt_profile::RunProfile),
    ACCELOPT_STAGE("profile_report", "Write profile_results.csv (AccelOpt columns), profile_results.json and summary.txt.",
                   kReportParams, accelopt_profile::RunProfileReport),
};

}  // namespace

ACCELOPT_EXPORT_PLUGIN("profile", "0.1.0", kStages)
