#include "pipeline/validator.h"

#include <set>

#include "core/text.h"
#include "pipeline/expressions.h"

namespace accelopt {

bool MatchesParamType(const nlohmann::json& value, const std::string& type) {
  if (type.empty() || type == "any") return true;
  if (type == "string") return value.is_string();
  if (type == "integer") return value.is_number_integer();
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "array") return value.is_array();
  if (type == "object") return value.is_object();
  return false;
}

namespace {

class Validator {
 public:
  Validator(const Pipeline& pipeline, StageRegistry& registry) : pipeline_(pipeline), registry_(registry) {}

  ResolvedStages Run() {
    CheckExpressions(pipeline_.vars, {pipeline_.file.string()}, &diagnostics_);
    for (const auto& stage : pipeline_.stages) Stage(stage);
    if (!diagnostics_.empty()) throw ConfigError(diagnostics_);
    return resolved_;
  }

 private:
  void Error(const SourceLocation& where, const std::string& message) { diagnostics_.push_back({where, message}); }

  void CheckReferences(const nlohmann::json& value, const SourceLocation& where) {
    for (const auto& id : ReferencedStages(value)) {
      if (!known_ids_.count(id)) {
        std::vector<std::string> known(known_ids_.begin(), known_ids_.end());
        Error(where, "expression refers to stage '" + id + "', which is not defined before this point" +
                         DidYouMeanSuffix(id, known));
      }
    }
  }

  std::shared_ptr<accelopt::Stage> Resolve(const StageSpec& spec) {
    const std::string& uses = spec.uses;
    if (uses.rfind("native:", 0) == 0) {
      std::string name = uses.substr(7);
      if (auto at = name.find('@'); at != std::string::npos) name = name.substr(0, at);
      auto stage = registry_.FindNative(name);
      if (!stage) {
        Error(spec.uses_where, "unknown stage 'native:" + name + "'" + DidYouMeanSuffix(name, registry_.NativeNames()) +
                                   "; `accelopt-host stages` lists the registered stages");
      }
      return stage;
    }
    if (uses.rfind("lua:", 0) == 0) {
      auto script = (pipeline_.file.parent_path() / uses.substr(4)).lexically_normal();
      if (!std::filesystem::exists(script)) {
        Error(spec.uses_where, "Lua stage script not found: " + script.string() + " (paths are relative to the pipeline file)");
        return nullptr;
      }
      try {
        return registry_.LuaStage(script, uses);
      } catch (const ConfigError& error) {
        for (const auto& d : error.diagnostics()) diagnostics_.push_back(d);
        return nullptr;
      }
    }
    Error(spec.uses_where, "unknown stage scheme in '" + uses + "': use native:<name> or lua:<path>");
    return nullptr;
  }

  void CheckWith(const StageSpec& spec, const accelopt::Stage& stage) {
    const nlohmann::json params = stage.Params();
    std::vector<std::string> names;
    for (const auto& [name, _] : params.items()) names.push_back(name);
    for (const auto& [name, value] : spec.with.items()) {
      auto where = spec.with_where.count(name) ? spec.with_where.at(name) : spec.where;
      if (!params.contains(name)) {
        Error(where, "stage " + stage.Uses() + " has no parameter '" + name + "'" + DidYouMeanSuffix(name, names));
        continue;
      }
      std::string type = params[name].value("type", "any");
      if (!ContainsExpression(value) && !MatchesParamType(value, type)) {
        Error(where, "parameter '" + name + "' of " + stage.Uses() + " must be of type " + type + ", got " +
                         std::string(value.type_name()) + " " + value.dump());
      }
    }
    for (const auto& [name, param] : params.items()) {
      if (param.value("required", false) && !spec.with.contains(name)) {
        Error(spec.where, "stage '" + spec.id + "' (" + stage.Uses() + ") is missing required parameter '" + name + "'");
      }
    }
  }

  void Stage(const StageSpec& spec) {
    CheckCondition(spec.if_expr, spec.if_where, &diagnostics_);
    CheckReferences(nlohmann::json(spec.if_expr.empty() ? "" : "${{ " + spec.if_expr + " }}"), spec.if_where);
    if (spec.loop) {
      CheckExpressions(spec.loop->max_iterations, spec.loop->where, &diagnostics_);
      CheckExpressions(spec.loop->carry, spec.loop->where, &diagnostics_);
      CheckReferences(spec.loop->carry, spec.loop->where);
      for (const auto& child : spec.body) Stage(child);
      CheckCondition(spec.loop->until, spec.loop->where, &diagnostics_);
      known_ids_.insert(spec.id);
      return;
    }
    CheckExpressions(spec.for_each, spec.for_each_where, &diagnostics_);
    CheckExpressions(spec.max_parallel, spec.where, &diagnostics_);
    CheckExpressions(spec.timeout_expr, spec.where, &diagnostics_);
    CheckReferences(spec.timeout_expr, spec.where);
    CheckReferences(spec.for_each, spec.for_each_where);
    for (const auto& [name, value] : spec.with.items()) {
      auto where = spec.with_where.count(name) ? spec.with_where.at(name) : spec.where;
      CheckExpressions(value, where, &diagnostics_);
      CheckReferences(value, where);
    }
    CheckExpressions(spec.carry, spec.where, &diagnostics_);
    if (!spec.uses.empty()) {
      if (auto stage = Resolve(spec)) {
        CheckWith(spec, *stage);
        resolved_[spec.id] = stage;
      }
    }
    known_ids_.insert(spec.id);
  }

  const Pipeline& pipeline_;
  StageRegistry& registry_;
  std::vector<Diagnostic> diagnostics_;
  std::set<std::string> known_ids_;
  ResolvedStages resolved_;
};

}  // namespace

ResolvedStages ValidatePipeline(const Pipeline& pipeline, StageRegistry& registry) {
  return Validator(pipeline, registry).Run();
}

}  // namespace accelopt
