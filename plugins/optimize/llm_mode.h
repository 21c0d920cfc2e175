// plugins/optimize/llm_mode.h - the llm/rules mode choice of the optimization
// stages (docs/llm.md). The LLM caller itself, its usage accounting and the spend
// caps' stop list are the SDK's (accelopt/sdk/llm.hpp).
#pragma once

#include <string>

#include "accelopt/plugin_sdk.hpp"

namespace accelopt_optimize {

/// Whether the `mode` parameter asks for the LLM ("llm") or the rules ("rules").
/// "auto" probes the endpoint. Returns true for LLM. Throws config_error otherwise.
bool UseLlm(const accelopt::sdk::StageContext& ctx, const std::string& mode, const std::string& endpoint, std::string* why = nullptr);

}  // namespace accelopt_optimize
