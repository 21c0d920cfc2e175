#include "plugin/registry.h"

#include <algorithm>

#include "core/errors.h"
#include "plugin/lua_stage.h"

namespace accelopt {

void StageRegistry::LoadPlugins(std::vector<std::string>* warnings) {
  for (const auto& dir : PluginSearchPath()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) continue;
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".so") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      try {
        LoadPluginFile(file);
      } catch (const ConfigError& error) {
        if (warnings) warnings->push_back(error.what());
      }
    }
  }
}

void StageRegistry::LoadPluginFile(const std::filesystem::path& path) {
  LoadedPlugin plugin = LoadPlugin(path);
  // A stage name that is already registered refuses the whole plugin: using
  // half of a plugin, or the wrong one of two same-named stages, would be worse.
  std::vector<Diagnostic> clashes;
  for (const auto& stage : plugin.stages) {
    std::string name = stage->Uses().substr(std::string("native:").size());
    if (auto it = native_.find(name); it != native_.end()) {
      clashes.push_back({SourceLocation{path.string()},
                         "stage 'native:" + name + "' of this plugin is already registered by " + it->second->Origin() +
                             "; the plugin is refused (rename the stage, or remove one of the two from the plugin path)"});
    }
  }
  if (!clashes.empty()) throw ConfigError(clashes);
  for (const auto& stage : plugin.stages) native_[stage->Uses().substr(std::string("native:").size())] = stage;
  plugins_.push_back(std::move(plugin));
}

std::shared_ptr<Stage> StageRegistry::FindNative(const std::string& name) const {
  auto it = native_.find(name);
  return it == native_.end() ? nullptr : it->second;
}

std::vector<std::string> StageRegistry::NativeNames() const {
  std::vector<std::string> names;
  for (const auto& [name, stage] : native_) names.push_back(name);
  return names;
}

std::shared_ptr<Stage> StageRegistry::LuaStage(const std::filesystem::path& script, const std::string& uses_text) {
  auto key = script.lexically_normal().string();
  if (auto it = lua_.find(key); it != lua_.end()) return it->second;
  auto stage = MakeLuaStage(script, uses_text);
  lua_[key] = stage;
  return stage;
}

std::vector<std::filesystem::path> StageRegistry::FindLuaScripts(const std::vector<std::filesystem::path>& dirs) {
  std::vector<std::filesystem::path> scripts;
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".lua") scripts.push_back(entry.path());
    }
  }
  std::sort(scripts.begin(), scripts.end());
  return scripts;
}

}  // namespace accelopt
