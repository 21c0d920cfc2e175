// commands.h - the subcommands of accelopt-host (see docs/cli.md).
#pragma once

#include <string>
#include <vector>

namespace accelopt::cli {

/// Exit codes of every command.
enum ExitCode : int {
  kExitOk = 0,      // everything succeeded
  kExitFailed = 1,  // some kernels, items or stages failed (results still written)
  kExitUsage = 2,   // bad flags, bad pipeline, missing files
};

struct RunOptions {
  std::string pipeline;
  std::vector<std::string> sets;
  std::string run_dir;
  std::string resume;  // run directory to continue (then pipeline/sets come from its run.json)
  int max_parallel = 0;  // 0 = no global cap beyond the stages' own
  int workers = 0;       // worker processes for untrusted candidates; 0 = default
  std::string neuron_cores;               // neuron backend: "0-31" etc.; "" = ACCELOPT_NEURON_CORES or neuron-ls
  std::vector<std::string> python_paths;  // extra sys.path folders (host and workers), added to python_path:
  std::string executor;                   // "local" | "slurm" | "" (backend.executor, else local)
  std::string gpus;                       // "0-3" | "auto" | "": one worker per GPU (CUDA_VISIBLE_DEVICES)
};
int RunCommand(const RunOptions& options, const std::vector<std::string>& argv);

int ValidateCommand(const std::string& pipeline, const std::vector<std::string>& sets);

int StagesCommand(bool as_json);

struct ProfileOptions {
  std::string kernel;
  std::string reference;
  std::string backend = "auto";
  std::string target = "trn1";
  double rel_tol = 2e-5;
  bool json = false;
  std::string isolation = "worker";  // "worker" (sandboxed process) or "inprocess"
  double timeout_s = 300;            // wall-clock limit of the worker call, s
  std::string memory_limit;          // worker address-space limit (bytes, or K/M/G/T suffix); "" = 4G (neuron: 3/4 of RAM)
  std::string neuron_cores;          // neuron backend: "0-31" etc. (the first is used); "" = discover
  std::vector<std::string> python_paths;  // extra sys.path folders (host and worker)
};
int ProfileCommand(const ProfileOptions& options);

}  // namespace accelopt::cli
