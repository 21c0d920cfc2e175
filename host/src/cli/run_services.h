// run_services.h - sets up the host services a run's stages can use (LLM
// endpoints from the pipeline's `llm:` block, the worker pool) and tears
// them down afterwards.
#pragma once

#include <memory>

#include "core/run_dir.h"
#include "pipeline/model.h"

namespace accelopt::cli {

/// Options of `run` that configure services.
struct ServiceOptions {
  int workers = 0;  // worker processes for isolated calls; 0 = default
  bool resume = false;  // reuse LLM replies from the run's transcript
  std::string neuron_cores;               // neuron pool: NeuronCores ("" = ACCELOPT_NEURON_CORES or neuron-ls)
  std::vector<std::string> python_paths;  // sys.path folders for the workers (python_path: and --python-path)
  std::string executor;                   // "local" | "slurm"; "" = backend.executor of the pipeline, else local
  std::string gpus;                       // "0-3" | "auto" (nvidia-smi) | "" (no GPU pinning)
};

/// Holds the services for the lifetime of one run; the destructor
/// uninstalls them from GlobalHostServices().
class RunServices {
 public:
  virtual ~RunServices() = default;
  /// Summary for run.json (e.g. LLM token usage and cost); may be null.
  virtual nlohmann::json Summary() const { return nullptr; }
  /// A short status for the progress line (the LLM spend against its caps); "" = nothing.
  virtual std::string ProgressText() const { return ""; }
};

/// Installs the services `pipeline` needs. Throws ConfigError for a bad
/// `llm:` block.
std::unique_ptr<RunServices> StartRunServices(const Pipeline& pipeline, const RunDirectory& run_dir,
                                              const ServiceOptions& options);

}  // namespace accelopt::cli
