// plugin_loader.h - loads native stage plugins (plugin_api.h) from disk.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "plugin/stage.h"

namespace accelopt {

/// One successfully loaded plugin library and its stages.
struct LoadedPlugin {
  std::string name;
  std::string version;
  std::filesystem::path path;
  std::vector<std::shared_ptr<Stage>> stages;
};

/// dlopen()s `path` (RTLD_NOW | RTLD_LOCAL), resolves accelopt_plugin_info()
/// and checks its api_version against ACCELOPT_PLUGIN_API_VERSION.
/// Throws ConfigError naming the file and the cause (missing symbol, wrong
/// API version, bad parameter JSON). The library is never unloaded.
LoadedPlugin LoadPlugin(const std::filesystem::path& path);

/// Plugin folders searched at start-up: the build's plugin folder, then each
/// entry of ACCELOPT_PLUGIN_PATH (colon-separated), in that order.
std::vector<std::filesystem::path> PluginSearchPath();

}  // namespace accelopt
