// lua/stage_script.h - Lua pipeline stages (`uses: lua:path/to/stage.lua`).
//
// A stage script is a text chunk that returns
//
//   return {
//     description = "One line shown by `accelopt-host stages`.",
//     params = { cases = { type = "array", required = true, doc = "..." } },
//     outputs = { cases = { type = "array", doc = "..." } },   -- optional
//     run = function(input) ... return outputs end,
//   }
//
// (or just `return function(input) ... end`). Every call runs in a fresh
// sandbox (lua/sandbox.h); see docs/lua-stages.md for the full contract.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "lua/sandbox.h"

namespace accelopt::lua {

/// Metadata of a stage script, read at load time.
struct StageScriptInfo {
  /// One-line description ("" if the script gives none).
  std::string description;
  /// `with:` parameter schema, same shape as native stages:
  /// {name: {"type": "string|integer|number|boolean|array|object|any",
  ///         "required": bool, "default": <json>, "doc": "...",
  ///         "enum": [allowed values]}}; {} if none.
  nlohmann::json params = nlohmann::json::object();
  /// Fields of the table `run` returns, from the script's `outputs`:
  /// {name: {"type": ..., "doc": "..."}}; {} if none (not checked further here).
  nlohmann::json outputs = nlohmann::json::object();
};

/// Runs the chunk of `script` (without calling `run`) and returns its
/// metadata. Throws LuaError: "script_error" if the file cannot be read, the
/// chunk fails, does not return a table with a `run` function, or `params`
/// is malformed; "syntax_error" with location "file.lua:LINE"; "timeout";
/// "out_of_memory".
StageScriptInfo LoadStageInfo(const std::filesystem::path& script, const Limits& limits = {});

/// Runs `run(input)` of `script` in a fresh sandbox and returns its outputs as
/// JSON (`nil` becomes {}). `input` is the JSON object the executor passes
/// ({"with", "vars", "stage_id", "stage_dir", "run_dir", ...}), converted to
/// marked Lua tables. Throws LuaError with kind "syntax_error",
/// "script_error", "timeout", "cancelled", "out_of_memory", "stage_failure"
/// (accel.fail; details = {kind, message, details}) or "bad_output".
nlohmann::json RunStage(const std::filesystem::path& script, const nlohmann::json& input, const HostHooks& hooks,
                        const Limits& limits = {});

/// LoadStageInfo for a script held in memory; `chunk_name` ("filter.lua")
/// is used in messages.
StageScriptInfo LoadStageInfoFromSource(std::string_view source, const std::string& chunk_name,
                                        const Limits& limits = {});

/// RunStage for a script held in memory; `chunk_name` ("filter.lua") is used
/// in messages.
nlohmann::json RunStageFromSource(std::string_view source, const std::string& chunk_name,
                                  const nlohmann::json& input, const HostHooks& hooks, const Limits& limits = {});

}  // namespace accelopt::lua
