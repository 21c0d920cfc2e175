// plugins/optimize/stage_files.h - the files the optimization stages read
// and write in the run directory (writes are atomic: accelopt::sdk::WriteFile).
#pragma once

#include <filesystem>
#include <string>

#include "accelopt/plugin_sdk.hpp"

namespace accelopt_optimize {

using nlohmann::json;

/// Whole file as text; StageFailure{io_error} when unreadable (accelopt/sdk/files.hpp).
using accelopt::sdk::ReadText;
/// Writes `text` (creating parent folders). Throws StageFailure{io_error}.
void WriteText(const std::filesystem::path& path, const std::string& text);
/// Writes `value` as indented JSON (creating parent folders). Throws StageFailure{io_error}.
void WriteJson(const std::filesystem::path& path, const json& value);
/// Appends one JSON line to `path` (thread-safe within the process); below the
/// run directory no symlink is followed (accelopt::sdk::AppendFile).
void AppendJsonLine(const std::filesystem::path& path, const json& value);
/// Characters that are not [A-Za-z0-9._-] become '_' (for file names).
std::string SafeName(const std::string& text);

}  // namespace accelopt_optimize
