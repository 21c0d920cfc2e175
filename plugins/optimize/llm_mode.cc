// plugins/optimize/llm_mode.cc - see llm_mode.h.
#include "llm_mode.h"

namespace accelopt_optimize {

using accelopt::sdk::StageFailure;
using nlohmann::json;

bool UseLlm(const accelopt::sdk::StageContext& ctx, const std::string& mode, const std::string& endpoint, std::string* why) {
  if (mode == "rules") return false;
  if (mode != "llm" && mode != "auto") {
    throw StageFailure("config_error", "mode must be auto, llm or rules, got '" + mode + "'");
  }
  json described;
  try {
    described = ctx.LlmChat({{"describe", true}, {"endpoint", endpoint}});
  } catch (const StageFailure& failure) {
    described = {{"available", false}, {"reason", failure.what()}};
  }
  bool available = described.value("available", false);
  if (why) *why = available ? "LLM endpoint '" + endpoint + "' (model " + described.value("model", "?") + ")" : described.value("reason", "no LLM");
  if (!available && mode == "llm") {
    throw StageFailure("llm_config", "mode llm: " + described.value("reason", std::string("no LLM endpoint")));
  }
  return available;
}

}  // namespace accelopt_optimize
