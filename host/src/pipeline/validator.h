// validator.h - checks a loaded pipeline against the stage registry, so that
// `validate` (and `run`, before it creates a run directory) catches what the
// run would otherwise hit. docs/pipelines.md lists every check.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "pipeline/model.h"
#include "pipeline/param_check.h"
#include "plugin/registry.h"

namespace accelopt {

/// Stages resolved for each runnable stage id of a pipeline.
using ResolvedStages = std::map<std::string, std::shared_ptr<Stage>>;

/// Resolves every `uses` (native names with did-you-mean; Lua scripts
/// relative to the pipeline file, loaded and syntax-checked in the
/// sandbox) and checks:
///  - `with` against each stage's declared parameters: unknown names,
///    missing required ones, values of the wrong type or outside the
///    parameter's `enum`. Literal values are checked as written; values whose
///    expressions read only `vars`, `backend` and `pipeline` are evaluated
///    here and checked as resolved (a required one that gives null is reported
///    as missing, with the expression text);
///  - vars: their expressions are evaluated as the run would;
///  - expressions everywhere: syntax, names (each name must be one the
///    expression can see at that place, with did-you-mean), references to
///    stages defined earlier, and `stages.<id>.outputs.<field>` against the
///    stage's declared outputs;
///  - `timeout:` expressions that can be resolved here give a duration,
///    `for_each` values a list and loop `max_iterations` an integer >= 1;
///  - the `llm:` block parses (durations, fields, ...), located by endpoint/field.
/// Throws ConfigError listing every problem as file:line:col.
ResolvedStages ValidatePipeline(const Pipeline& pipeline, StageRegistry& registry);

}  // namespace accelopt
