// The declared boundary between the host's C++ and its Python side (docs/architecture.md,
// "The C++/Python boundary"). Every Python function the host or a built-in plugin calls is an
// entry here: its name, the module and function that implement it, and the version of its
// contract. host/python/accelopt/api.py declares the same entries with the JSON schema of their
// argument; tests/python/structure/test_api_boundary.py keeps the two identical and fails on any
// other "accelopt." string in C++, and the host checks them against the Python tree it loads
// before a run (python::CheckApi). The names are compiled in, never looked up at run time: a
// worker process runs candidate code, and a table in Python it could patch must not decide what
// the worker calls next.
#pragma once

namespace accelopt::api {

/// One Python function of the boundary. `version` changes with the function's contract
/// (argument or result); the Python side must declare the same.
struct Entry {
  const char* name;
  const char* module;
  const char* function;
  int version;
};

/// The Python module that declares the boundary (ENTRIES, check).
inline constexpr const char* kModule = "accelopt.api";

// --- rules, moves and edits -------------------------------------------------------------
inline constexpr Entry kRulesPropose{"rules.propose", "accelopt.rules", "propose", 1};
inline constexpr Entry kRulesApply{"rules.apply", "accelopt.rules", "apply", 1};
inline constexpr Entry kEditsResolve{"edits.resolve", "accelopt.edits", "resolve", 1};
inline constexpr Entry kVocabularyDescribe{"vocabulary.describe", "accelopt.search.vocabulary", "describe", 1};
inline constexpr Entry kVocabularyResolveMove{"vocabulary.resolve_move", "accelopt.search.vocabulary", "resolve_move", 1};
inline constexpr Entry kBottleneckWeigh{"bottleneck.weigh", "accelopt.search.bottleneck", "weigh", 1};
inline constexpr Entry kCanonStateHashes{"canon.state_hashes", "accelopt.search.canon", "state_hashes", 1};

// --- problems, peaks and prompts --------------------------------------------------------
inline constexpr Entry kPeakDescribe{"peak.describe", "accelopt.peak", "describe", 1};
inline constexpr Entry kLaunchCostDescribe{"launch_cost.describe", "accelopt.launch_cost", "describe", 1};

// --- evaluation (the evaluators of accelopt.evaluators, and their trusted side) --------
inline constexpr Entry kNkiProfile{"nki.profile", "accelopt.profile", "profile_kernel", 1};
inline constexpr Entry kFibTrial{"fib.trial", "accelopt.fib.evaluate", "trial", 1};
inline constexpr Entry kSandboxPrepare{"sandbox.prepare", "accelopt.sandbox.trusted", "prepare", 1};
inline constexpr Entry kSandboxAhead{"sandbox.ahead", "accelopt.sandbox.trusted", "ahead", 1};
inline constexpr Entry kSandboxFinish{"sandbox.finish", "accelopt.sandbox.trusted", "finish", 1};
inline constexpr Entry kSandboxDiscard{"sandbox.discard", "accelopt.sandbox.trusted", "discard", 1};
inline constexpr Entry kSandboxSettleDraws{"sandbox.settle_draws", "accelopt.sandbox.draws", "settle_store", 1};

// --- the worker process (host/src/worker) ----------------------------------------------
inline constexpr Entry kWorkerStartup{"worker.startup", "accelopt.sandbox.worker_entry", "startup", 1};
inline constexpr Entry kWorkerWarmUp{"worker.warm_up", "accelopt.sandbox.worker_entry", "warm_up", 1};
inline constexpr Entry kWorkerHandle{"worker.handle", "accelopt.sandbox.worker_entry", "handle", 1};
inline constexpr Entry kWorkerNativeContentCheck{"worker.use_native_content_check", "accelopt.sandbox.worker_entry",
                                                 "use_native_content_check", 1};
inline constexpr Entry kWorkerIdentityChanges{"worker.identity_changes", "accelopt.sandbox.worker_entry",
                                              "identity_changes", 1};
inline constexpr Entry kWorkerDigestChanges{"worker.digest_changes", "accelopt.sandbox.worker_entry",
                                            "digest_changes", 1};
inline constexpr Entry kIntegrityWatchedModules{"integrity.watched_modules", "accelopt.sandbox.integrity",
                                                "watched_modules", 1};
inline constexpr Entry kIntegrityContentWatch{"integrity.content_watch", "accelopt.sandbox.integrity",
                                              "content_watch", 1};
inline constexpr Entry kHardwareNeuronPaths{"hardware.neuron_paths", "accelopt.sandbox.hardware_profile",
                                            "neuron_paths", 1};
inline constexpr Entry kHardwareExtraPaths{"hardware.extra_paths", "accelopt.sandbox.hardware_profile", "extra_paths",
                                           1};

// --- backends and devices ---------------------------------------------------------------
inline constexpr Entry kBackendsChoose{"backends.choose", "accelopt.backends", "choose_backend", 1};
inline constexpr Entry kBackendsDoctor{"backends.doctor", "accelopt.backends.doctor", "doctor", 1};
inline constexpr Entry kNeuronCoresDiscover{"neuron_cores.discover", "accelopt.backends.neuron_cores", "discover", 1};
inline constexpr Entry kGpusDiscover{"gpus.discover", "accelopt.backends.gpus", "discover", 1};
inline constexpr Entry kDeviceProfileArtifacts{"device_profile.artifacts", "accelopt.backends.device_profile",
                                               "profile_artifacts", 1};

// --- FlashInfer-Bench -------------------------------------------------------------------
inline constexpr Entry kFibTorchAvailable{"fib.torch_available", "accelopt.fib.evaluate", "torch_available", 1};
inline constexpr Entry kFibEnvironment{"fib.environment", "accelopt.fib.evaluate", "environment", 1};
inline constexpr Entry kFibOpenWorkload{"fib.open_workload", "accelopt.fib.evaluate", "open_workload", 1};
inline constexpr Entry kFibCloseWorkload{"fib.close_workload", "accelopt.fib.evaluate", "close_workload", 1};
inline constexpr Entry kFibRunCuda{"fib.run_cuda", "accelopt.fib.gpu", "run_cuda", 1};
inline constexpr Entry kFibRunTriton{"fib.run_triton", "accelopt.fib.gpu", "run_triton", 1};
inline constexpr Entry kFibGpuPython{"fib.gpu_python", "accelopt.fib.gpu", "gpu_python", 1};
inline constexpr Entry kFibCheckModule{"fib.check_module", "accelopt.fib.syntax", "check_module", 1};
inline constexpr Entry kFibCheckExpression{"fib.check_expression", "accelopt.fib.syntax", "check_expression", 1};

// --- runs, reports and Lua --------------------------------------------------------------
inline constexpr Entry kReportSummarizeRun{"report.summarize_run", "accelopt.report", "summarize_run", 1};
inline constexpr Entry kReportRender{"report.render", "accelopt.report", "render_report", 1};
inline constexpr Entry kReportCompareRuns{"report.compare_runs", "accelopt.report", "compare_runs", 1};
inline constexpr Entry kLuaCall{"lua.call", "accelopt.lua_calls", "call", 1};

/// Every entry, for the start-up check against the Python tree (python::CheckApi).
inline constexpr Entry kAll[] = {
    kRulesPropose,
    kRulesApply,
    kEditsResolve,
    kVocabularyDescribe,
    kVocabularyResolveMove,
    kBottleneckWeigh,
    kCanonStateHashes,
    kPeakDescribe,
    kLaunchCostDescribe,
    kNkiProfile,
    kFibTrial,
    kSandboxPrepare,
    kSandboxAhead,
    kSandboxFinish,
    kSandboxDiscard,
    kSandboxSettleDraws,
    kWorkerStartup,
    kWorkerWarmUp,
    kWorkerHandle,
    kWorkerNativeContentCheck,
    kWorkerIdentityChanges,
    kWorkerDigestChanges,
    kIntegrityWatchedModules,
    kIntegrityContentWatch,
    kHardwareNeuronPaths,
    kHardwareExtraPaths,
    kBackendsChoose,
    kBackendsDoctor,
    kNeuronCoresDiscover,
    kGpusDiscover,
    kDeviceProfileArtifacts,
    kFibTorchAvailable,
    kFibEnvironment,
    kFibOpenWorkload,
    kFibCloseWorkload,
    kFibRunCuda,
    kFibRunTriton,
    kFibGpuPython,
    kFibCheckModule,
    kFibCheckExpression,
    kReportSummarizeRun,
    kReportRender,
    kReportCompareRuns,
    kLuaCall,
};

}  // namespace accelopt::api
