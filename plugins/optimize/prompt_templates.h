// plugins/optimize/prompt_templates.h - the mustache prompt templates of a
// prompts folder (docs/prompts.md).
#pragma once

#include <filesystem>
#include <string>

#include "accelopt/plugin_sdk.hpp"

namespace accelopt_optimize {

using nlohmann::json;

/// Mustache templates from a prompts directory. `{{x}}` is NOT HTML-escaped.
/// Partials `{{> name}}` load `<dir>/<name>.mustache`. Per target (docs/prompts.md,
/// "Prompts per target"): a template or partial in `<dir>/targets/<target>/` replaces
/// the one of the same name in `<dir>`, so the hardware facts and API forms follow
/// the pipeline's `backend.target`.
class Prompts {
 public:
  /// `dir` must hold the templates; `target` ("trn1" when empty) names the folder under
  /// `<dir>/targets/`. Throws StageFailure{config_error} if `dir` is missing, or if `dir`
  /// has a `targets/` folder without one for `target` (a prompts folder without
  /// `targets/`, e.g. one for another language, ignores the target).
  explicit Prompts(std::filesystem::path dir, std::string target = "");
  /// Renders `<dir>/[targets/<target>/]<name>.mustache` with `data` (a JSON object).
  /// Throws StageFailure{prompt_error} for an unreadable or invalid template.
  std::string Render(const std::string& name, const json& data) const;
  /// `<dir>/<name>` parsed as JSON. Throws StageFailure{prompt_error}.
  json Data(const std::string& name) const;
  const std::filesystem::path& dir() const { return dir_; }
  const std::string& target() const { return target_; }

 private:
  /// `<dir>/targets/<target>/<file>` when it exists, else `<dir>/<file>`.
  std::filesystem::path Resolve(const std::string& file) const;
  std::filesystem::path dir_;
  std::string target_;
  std::filesystem::path target_dir_;  ///< empty when `dir` has no targets/ folder
};

}  // namespace accelopt_optimize
