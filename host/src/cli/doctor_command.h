// doctor_command.h - `accelopt-host doctor`: what the neuron backend finds on this machine (docs/trainium.md).
#pragma once

#include <string>
#include <vector>

namespace accelopt::cli {

struct DoctorOptions {
  std::vector<std::string> python_paths;  // --python-path, as for profile/run
  std::string neuron_cores;               // --neuron-cores (else ACCELOPT_NEURON_CORES, else neuron-ls)
  std::string target = "auto";            // auto: neuron-ls's instance type
  bool json = false;                      // print the report as JSON
};

/// Prints accelopt.backends.doctor's report: Python, DLAMI venvs, SDK and both NKI namespaces,
/// tools, NeuronCores (busy ones left out), target and LNC, sandbox exceptions, and what a
/// profile or run will do. Runs no kernel. Returns kExitOk when it found no problem, else kExitFailed.
int DoctorCommand(const DoctorOptions& options);

}  // namespace accelopt::cli
