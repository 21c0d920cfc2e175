// accelopt/sdk/prompts.hpp - prompt templates: the mustache templates of a prompts folder
// (kainjow mustache, Debian libkainjow-mustache-dev), the one renderer of every optimize loop
// (NKIBench's prompts/, FlashInfer-Bench's prompts/fib/; docs/prompts.md).
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include <kainjow/mustache.hpp>
#include <nlohmann/json.hpp>

#include "accelopt/sdk/failure.hpp"
#include "accelopt/sdk/files.hpp"
#include "accelopt/sdk/numbers.hpp"

namespace accelopt::sdk {

namespace prompts_detail {

using nlohmann::json;
using kainjow::mustache::data;

inline std::string NumberText(const json& value) {
  if (value.is_number_integer() || value.is_number_unsigned()) return value.dump();
  return Significant(value.get<double>());
}

inline data ToData(const json& value) {
  switch (value.type()) {
    case json::value_t::object: {
      data out{data::type::object};
      for (const auto& [key, item] : value.items()) out.set(key, ToData(item));
      return out;
    }
    case json::value_t::array: {
      data out{data::type::list};
      for (const auto& item : value) out.push_back(ToData(item));
      return out;
    }
    case json::value_t::string:
      return data{value.get<std::string>()};
    case json::value_t::boolean:
      return value.get<bool>() ? data{data::type::bool_true} : data{data::type::bool_false};
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return data{NumberText(value)};
    default:
      return data{data::type::bool_false};
  }
}

}  // namespace prompts_detail

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
  std::string Render(const std::string& name, const nlohmann::json& data) const;
  /// `<dir>/<name>` parsed as JSON. Throws StageFailure{prompt_error}.
  nlohmann::json Data(const std::string& name) const;
  const std::filesystem::path& dir() const { return dir_; }
  const std::string& target() const { return target_; }

 private:
  /// `<dir>/targets/<target>/<file>` when it exists, else `<dir>/<file>`.
  std::filesystem::path Resolve(const std::string& file) const;
  std::filesystem::path dir_;
  std::string target_;
  std::filesystem::path target_dir_;  ///< empty when `dir` has no targets/ folder
};

inline Prompts::Prompts(std::filesystem::path dir, std::string target) : dir_(std::move(dir)), target_(target.empty() ? "trn1" : std::move(target)) {
  if (dir_.empty() || !std::filesystem::is_directory(dir_)) {
    throw StageFailure("config_error", "prompts directory not found: '" + dir_.string() + "' (parameter `prompts`)");
  }
  const std::filesystem::path targets = dir_ / "targets";
  if (std::filesystem::is_directory(targets)) {
    target_dir_ = targets / target_;
    if (!std::filesystem::is_directory(target_dir_)) {
      throw StageFailure("config_error", "no prompts for target '" + target_ + "': " + target_dir_.string() +
                                             " does not exist (parameter `target`, backend.target)");
    }
  }
}

inline std::filesystem::path Prompts::Resolve(const std::string& file) const {
  if (!target_dir_.empty() && std::filesystem::exists(target_dir_ / file)) return target_dir_ / file;
  return dir_ / file;
}

inline std::string Prompts::Render(const std::string& name, const nlohmann::json& values) const {
  using namespace prompts_detail;
  using kainjow::mustache::mustache;
  const std::filesystem::path file = Resolve(name + ".mustache");
  std::string text;
  try {
    text = ReadText(file);
  } catch (const StageFailure&) {
    throw StageFailure("prompt_error", "missing prompt template " + file.string());
  }
  mustache tmpl{text};
  if (!tmpl.is_valid()) throw StageFailure("prompt_error", file.string() + ": " + tmpl.error_message());
  tmpl.set_custom_escape([](const std::string& s) { return s; });
  data root = ToData(values.is_object() ? values : json::object());
  // Partials: every other template of the directory, rendered with the same data; the
  // target's folder adds its own and replaces those of the same name.
  std::map<std::string, std::filesystem::path> partials;
  for (const std::filesystem::path& folder : {dir_, target_dir_}) {
    if (folder.empty()) continue;
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
      if (entry.path().extension() == ".mustache") partials[entry.path().stem().string()] = entry.path();
    }
  }
  for (const auto& [partial_name, partial_file] : partials) {
    if (partial_file == file) continue;
    root.set(partial_name, kainjow::mustache::partial{[partial_file]() { return ReadText(partial_file); }});
  }
  std::string out = tmpl.render(root);
  if (!tmpl.is_valid()) throw StageFailure("prompt_error", file.string() + ": " + tmpl.error_message());
  return out;
}

inline nlohmann::json Prompts::Data(const std::string& name) const {
  using nlohmann::json;
  const std::filesystem::path file = Resolve(name);
  json value = json::parse(ReadText(file), nullptr, false);
  if (value.is_discarded()) throw StageFailure("prompt_error", file.string() + ": not valid JSON");
  return value;
}

}  // namespace accelopt::sdk
