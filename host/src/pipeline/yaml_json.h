// yaml_json.h - YAML nodes to JSON values with YAML 1.2 core-schema typing.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "core/errors.h"

namespace accelopt {

/// Location of a node in `file` (yaml-cpp marks are 0-based).
SourceLocation LocationOf(const YAML::Node& node, const std::string& file);

/// Converts a scalar by the YAML 1.2 core schema: quoted → string;
/// null/~/empty → null; true/false → bool; integers; floats (incl. .inf,
/// .nan); anything else → string.
nlohmann::json ScalarToJson(const YAML::Node& scalar);

/// Converts a whole node. Duplicate mapping keys (which yaml-cpp accepts
/// silently) are appended to `diagnostics` with their location.
nlohmann::json YamlToJson(const YAML::Node& node, const std::string& file, std::vector<Diagnostic>* diagnostics);

/// Appends a diagnostic for every duplicate key in every mapping below `node`.
void CheckDuplicateKeys(const YAML::Node& node, const std::string& file, std::vector<Diagnostic>* diagnostics);

}  // namespace accelopt
