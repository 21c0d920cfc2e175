// profile_stages.h - the stages of the `profile` plugin.
#pragma once

#include "accelopt/plugin_sdk.hpp"

namespace accelopt_profile {

/// native:profile (see profile_stage.cc).
nlohmann::json RunProfile(accelopt::sdk::StageContext& ctx);

/// native:profile_results (see profile_results.cc).
nlohmann::json RunProfileResults(accelopt::sdk::StageContext& ctx);
/// native:profile_report: the former name of native:profile_results (warns).
nlohmann::json RunProfileReportDeprecated(accelopt::sdk::StageContext& ctx);

}  // namespace accelopt_profile
