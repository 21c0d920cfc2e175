// loader.h - reads a pipeline YAML file strictly.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/model.h"

namespace accelopt {

/// Parses `path`, applies `overrides` ("vars.x=1", "backend.target=trn2";
/// the value is parsed as YAML, so `vars.n=3` is an integer) and checks the
/// schema: unknown keys (with did-you-mean), duplicate keys, wrong types,
/// bad durations, loops without max_iterations, duplicate stage ids.
/// Throws ConfigError listing every problem as file:line:col.
/// Stage names and parameters are checked later by ValidatePipeline().
Pipeline LoadPipeline(const std::filesystem::path& path, const std::vector<std::string>& overrides = {});

}  // namespace accelopt
