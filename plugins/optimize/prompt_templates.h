// plugins/optimize/prompt_templates.h - the mustache prompt templates of a
// prompts folder (docs/prompts.md).
#pragma once

#include <filesystem>
#include <string>

#include "accelopt/plugin_sdk.hpp"

namespace accelopt_optimize {

using nlohmann::json;

/// Mustache templates from a prompts directory. `{{x}}` is NOT HTML-escaped.
/// Partials `{{> name}}` load `<dir>/<name>.mustache`.
class Prompts {
 public:
  /// `dir` must hold the templates. Throws StageFailure{config_error} if missing.
  explicit Prompts(std::filesystem::path dir);
  /// Renders `<dir>/<name>.mustache` with `data` (a JSON object). Throws
  /// StageFailure{prompt_error} for an unreadable or invalid template.
  std::string Render(const std::string& name, const json& data) const;
  /// `<dir>/<name>` parsed as JSON. Throws StageFailure{prompt_error}.
  json Data(const std::string& name) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace accelopt_optimize
