// profile_stages.h - the stages of the `profile` plugin.
#pragma once

#include "accelopt/plugin_sdk.hpp"

namespace accelopt_profile {

/// native:profile (see profile_stage.cc).
nlohmann::json RunProfile(accelopt::sdk::StageContext& ctx);

/// native:profile_report (see profile_report.cc).
nlohmann::json RunProfileReport(accelopt::sdk::StageContext& ctx);

}  // namespace accelopt_profile
