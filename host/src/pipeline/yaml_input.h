// yaml_input.h - reading pipeline YAML from untrusted files and --set values
// with bounds: regular files only, a size cap, UTF-8 everywhere, and a cap on
// the size of the document once its aliases are expanded ("billion laughs").
#pragma once

#include "core/text.h"  // FindInvalidUtf8

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

namespace accelopt {

/// Largest pipeline file read, in bytes (4 MiB).
inline constexpr std::uintmax_t kMaxPipelineBytes = 4u << 20;
/// Most nodes (scalars, nulls, sequences, mappings) a YAML document may hold
/// once every alias is expanded. Shipped pipelines hold a few hundred.
inline constexpr std::uint64_t kMaxYamlNodes = 200000;

/// Reads a pipeline file. Refuses anything that is not a regular file
/// (`/dev/zero`, a FIFO, a directory) and files larger than `max_bytes`,
/// without reading past the limit. Throws ConfigError naming `path`.
std::string ReadPipelineFile(const std::filesystem::path& path, std::uintmax_t max_bytes = kMaxPipelineBytes);

/// Parses one YAML document from `text` after checking it:
///  * invalid UTF-8 -> ConfigError "<file>:<line>:<col>: error: invalid UTF-8"
///    (line and column of the first bad byte; columns count bytes);
///  * more than `max_nodes` nodes after alias expansion, or an alias that
///    refers to the node that contains it -> ConfigError at the alias;
///  * a YAML syntax error -> ConfigError "invalid YAML: ..." at the parser's mark.
/// `file` names the source in messages (a path, or "--set vars.x").
YAML::Node LoadYamlChecked(const std::string& text, const std::string& file, std::uint64_t max_nodes = kMaxYamlNodes);

}  // namespace accelopt
