#include "prompt_templates.h"

#include <map>

#include <kainjow/mustache.hpp>

#include "common.h"

namespace fs = std::filesystem;

namespace accelopt_optimize {

namespace {

using kainjow::mustache::data;
using kainjow::mustache::mustache;

std::string NumberText(const json& value) {
  if (value.is_number_integer() || value.is_number_unsigned()) return value.dump();
  return Significant(value.get<double>());
}

data ToData(const json& value) {
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

}  // namespace

Prompts::Prompts(fs::path dir, std::string target) : dir_(std::move(dir)), target_(target.empty() ? "trn1" : std::move(target)) {
  if (dir_.empty() || !fs::is_directory(dir_)) {
    throw StageFailure("config_error", "prompts directory not found: '" + dir_.string() + "' (parameter `prompts`)");
  }
  const fs::path targets = dir_ / "targets";
  if (fs::is_directory(targets)) {
    target_dir_ = targets / target_;
    if (!fs::is_directory(target_dir_)) {
      throw StageFailure("config_error", "no prompts for target '" + target_ + "': " + target_dir_.string() +
                                             " does not exist (parameter `target`, backend.target)");
    }
  }
}

fs::path Prompts::Resolve(const std::string& file) const {
  if (!target_dir_.empty() && fs::exists(target_dir_ / file)) return target_dir_ / file;
  return dir_ / file;
}

std::string Prompts::Render(const std::string& name, const json& values) const {
  const fs::path file = Resolve(name + ".mustache");
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
  std::map<std::string, fs::path> partials;
  for (const fs::path& folder : {dir_, target_dir_}) {
    if (folder.empty()) continue;
    for (const auto& entry : fs::directory_iterator(folder)) {
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

json Prompts::Data(const std::string& name) const {
  const fs::path file = Resolve(name);
  json value = json::parse(ReadText(file), nullptr, false);
  if (value.is_discarded()) throw StageFailure("prompt_error", file.string() + ": not valid JSON");
  return value;
}

}  // namespace accelopt_optimize
