// registry.h - every stage a pipeline can `use`: native plugin stages and
// Lua scripts.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plugin/plugin_loader.h"
#include "plugin/stage.h"

namespace accelopt {

class StageRegistry {
 public:
  /// Loads every *.so in PluginSearchPath(). A broken plugin is reported
  /// through `warnings` and skipped; it never stops the host. A plugin with
  /// a stage name that is already registered is refused the same way, and
  /// the warning names both files.
  void LoadPlugins(std::vector<std::string>* warnings);

  /// Loads one plugin file; throws ConfigError (wrong API version, bad
  /// schema, a stage name already registered by another file: the message
  /// names both origins).
  void LoadPluginFile(const std::filesystem::path& path);

  /// The native stage called `name`, or nullptr.
  std::shared_ptr<Stage> FindNative(const std::string& name) const;

  /// Native stage names, sorted (for did-you-mean and listings).
  std::vector<std::string> NativeNames() const;

  /// A Lua stage for `script` (resolved to an absolute path by the caller).
  /// Reads its metadata in the sandbox; throws ConfigError with the
  /// script's file:line on a syntax or load error. Cached per path.
  std::shared_ptr<Stage> LuaStage(const std::filesystem::path& script, const std::string& uses_text);

  /// Lua stage scripts found in `dirs` (*.lua), for `accelopt-host stages`.
  static std::vector<std::filesystem::path> FindLuaScripts(const std::vector<std::filesystem::path>& dirs);

  const std::vector<LoadedPlugin>& plugins() const { return plugins_; }

 private:
  std::vector<LoadedPlugin> plugins_;
  std::map<std::string, std::shared_ptr<Stage>> native_;
  std::map<std::string, std::shared_ptr<Stage>> lua_;
};

}  // namespace accelopt
