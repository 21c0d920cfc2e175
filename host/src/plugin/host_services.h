// host_services.h - services the host lends to native stages beyond Python
// calls: LLM chat and isolated (worker-process) evaluation. The run command
// installs them for the duration of a run (cli/run_services.cc); a stage
// that needs an absent service gets a clear error.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace accelopt {

struct HostServices {
  /// request -> response (AccelHostApi::llm_chat). Throws StageError with an
  /// llm_* kind. `stage_id` is for per-stage token accounting.
  std::function<nlohmann::json(const nlohmann::json& request, const std::string& stage_id)> llm_chat;
  /// (module, function, arg, limits) -> result, in a worker process.
  /// Throws StageError (timeout, out_of_memory, crash, python_error, ...).
  std::function<nlohmann::json(const std::string& module, const std::string& function, const nlohmann::json& arg,
                               const nlohmann::json& limits)>
      isolated_call;
};

/// The process-wide services (set before a run starts, read by stages).
HostServices& GlobalHostServices();

}  // namespace accelopt
