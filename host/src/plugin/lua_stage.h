// lua_stage.h - a `lua:` stage: one script run in a fresh sandbox per call.
#pragma once

#include <filesystem>
#include <memory>

#include "plugin/stage.h"

namespace accelopt {

/// Reads the script's metadata (description, params, outputs) in the
/// sandbox. Throws ConfigError "script.lua:LINE: ..." on syntax or load
/// errors, and naming the script for a malformed params/outputs schema.
std::shared_ptr<Stage> MakeLuaStage(const std::filesystem::path& script, const std::string& uses_text);

}  // namespace accelopt
