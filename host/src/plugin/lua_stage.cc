#include "plugin/lua_stage.h"

#include "core/errors.h"
#include "lua/stage_script.h"
#include "pipeline/param_check.h"

namespace accelopt {
namespace {

class LuaScriptStage : public Stage {
 public:
  LuaScriptStage(std::filesystem::path script, std::string uses, lua::StageScriptInfo info)
      : script_(std::move(script)), uses_(std::move(uses)), info_(std::move(info)) {}

  std::string Uses() const override { return uses_; }
  std::string Description() const override { return info_.description; }
  nlohmann::json Params() const override { return info_.params; }
  nlohmann::json Outputs() const override { return info_.outputs; }
  std::string Origin() const override { return script_.string(); }

  nlohmann::json Run(const StageInvocation& invocation) const override {
    lua::HostHooks hooks;
    hooks.log = invocation.log;
    hooks.read_root = invocation.run_dir;
    hooks.write_root = invocation.stage_dir;
    auto cancelled = invocation.cancelled;
    hooks.cancelled = [cancelled] { return cancelled->load(); };
    lua::Limits limits;
    if (invocation.timeout_ms > 0) limits.timeout = std::chrono::milliseconds(invocation.timeout_ms);
    nlohmann::json input = {{"with", invocation.with},         {"vars", invocation.vars},
                            {"stage_id", invocation.stage_id}, {"stage_dir", invocation.stage_dir.string()},
                            {"run_dir", invocation.run_dir.string()}};
    try {
      return lua::RunStage(script_, input, hooks, limits);
    } catch (const lua::LuaError& error) {
      nlohmann::json details = {{"location", error.location}, {"traceback", error.traceback}};
      if (!error.details.is_null()) details["details"] = error.details;
      std::string kind = error.kind == "stage_failure" && error.details.is_object() && error.details.contains("kind")
                             ? error.details["kind"].get<std::string>()
                             : error.kind;
      throw StageError(kind, error.what(), details);
    }
  }

 private:
  std::filesystem::path script_;
  std::string uses_;
  lua::StageScriptInfo info_;
};

}  // namespace

std::shared_ptr<Stage> MakeLuaStage(const std::filesystem::path& script, const std::string& uses_text) {
  try {
    lua::StageScriptInfo info = lua::LoadStageInfo(script);
    // The same schema rules as native stages (enum values of the right type, ...).
    std::vector<Diagnostic> problems;
    for (const char* what : {"params", "outputs"}) {
      for (const auto& problem : CheckSchema(what == std::string("params") ? info.params : info.outputs, what)) {
        problems.push_back({SourceLocation{script.string()}, "Lua stage " + uses_text + ": " + problem});
      }
    }
    if (!problems.empty()) throw ConfigError(problems);
    return std::make_shared<LuaScriptStage>(script, uses_text, std::move(info));
  } catch (const lua::LuaError& error) {
    SourceLocation where{script.string()};
    std::string message = error.what();
    // The sandbox already prefixes "name.lua:LINE:"; keep the full path in the diagnostic.
    if (!error.location.empty()) {
      auto colon = error.location.rfind(':');
      if (colon != std::string::npos) where.line = std::atoi(error.location.c_str() + colon + 1);
    }
    throw ConfigError(where, "Lua stage " + uses_text + ": " + message);
  }
}

}  // namespace accelopt
