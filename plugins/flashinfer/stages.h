// plugins/flashinfer/stages.h - the FlashInfer-Bench stages (docs/flashinfer.md).
#pragma once

#include "accelopt/plugin_sdk.hpp"

namespace accelopt_fib_plugin {

nlohmann::json RunSelectTraces(accelopt::sdk::StageContext& ctx);
nlohmann::json RunFibEvaluate(accelopt::sdk::StageContext& ctx);
nlohmann::json RunFibSummary(accelopt::sdk::StageContext& ctx);
nlohmann::json RunFibOptimizeInit(accelopt::sdk::StageContext& ctx);
nlohmann::json RunFibPlan(accelopt::sdk::StageContext& ctx);
nlohmann::json RunFibExecute(accelopt::sdk::StageContext& ctx);
nlohmann::json RunFibSummarize(accelopt::sdk::StageContext& ctx);
nlohmann::json RunFibOptimizeResults(accelopt::sdk::StageContext& ctx);
/// native:fib_optimize_report - the former name of native:fib_optimize_results (warns).
nlohmann::json RunFibOptimizeReportDeprecated(accelopt::sdk::StageContext& ctx);
nlohmann::json RunFibScore(accelopt::sdk::StageContext& ctx);

}  // namespace accelopt_fib_plugin
