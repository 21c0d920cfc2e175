// doctor_command.cc - `accelopt-host doctor` (docs/trainium.md).
#include "cli/doctor_command.h"

#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "python/interpreter.h"

namespace accelopt::cli {

int DoctorCommand(const DoctorOptions& options) {
  std::vector<std::string> paths;
  for (const auto& path : options.python_paths) paths.push_back(std::filesystem::absolute(path).string());
  nlohmann::json reply;
  try {
    python::Initialize(paths);
    nlohmann::json request = {{"target", options.target}};
    if (!options.neuron_cores.empty()) request["neuron_cores"] = options.neuron_cores;
    reply = python::CallJson(accelopt::api::kBackendsDoctor, request);
  } catch (const std::exception& error) {
    std::cerr << "doctor: " << error.what() << "\n";
    return kExitFailed;
  }
  if (options.json)
    std::cout << reply["report"].dump(2) << "\n";
  else
    std::cout << reply.value("text", "");
  return reply["report"]["problems"].empty() ? kExitOk : kExitFailed;
}

}  // namespace accelopt::cli
