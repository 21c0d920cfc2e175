// validator.h - checks a loaded pipeline against the stage registry.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "pipeline/model.h"
#include "plugin/registry.h"

namespace accelopt {

/// Stages resolved for each runnable stage id of a pipeline.
using ResolvedStages = std::map<std::string, std::shared_ptr<Stage>>;

/// Resolves every `uses` (native names with did-you-mean; Lua scripts
/// relative to the pipeline file, loaded and syntax-checked in the
/// sandbox), checks `with` against each stage's declared parameters
/// (unknown names, missing required ones, literal values of the wrong type),
/// checks expression syntax everywhere, and that expressions only refer to
/// stages defined earlier. Throws ConfigError listing every problem.
ResolvedStages ValidatePipeline(const Pipeline& pipeline, StageRegistry& registry);

/// True if `value` has the JSON type named by a parameter's "type"
/// (string, integer, number, boolean, array, object, any).
bool MatchesParamType(const nlohmann::json& value, const std::string& type);

}  // namespace accelopt
