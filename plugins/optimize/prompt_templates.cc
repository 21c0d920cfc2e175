#include "prompt_templates.h"

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

Prompts::Prompts(fs::path dir) : dir_(std::move(dir)) {
  if (dir_.empty() || !fs::is_directory(dir_)) {
    throw StageFailure("config_error", "prompts directory not found: '" + dir_.string() + "' (parameter `prompts`)");
  }
}

std::string Prompts::Render(const std::string& name, const json& values) const {
  const fs::path file = dir_ / (name + ".mustache");
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
  // Partials: every other template of the directory, rendered with the same data.
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (entry.path().extension() != ".mustache" || entry.path() == file) continue;
    const std::string partial_name = entry.path().stem().string();
    const fs::path partial_file = entry.path();
    root.set(partial_name, kainjow::mustache::partial{[partial_file]() { return ReadText(partial_file); }});
  }
  std::string out = tmpl.render(root);
  if (!tmpl.is_valid()) throw StageFailure("prompt_error", file.string() + ": " + tmpl.error_message());
  return out;
}

json Prompts::Data(const std::string& name) const {
  const fs::path file = dir_ / name;
  json value = json::parse(ReadText(file), nullptr, false);
  if (value.is_discarded()) throw StageFailure("prompt_error", file.string() + ": not valid JSON");
  return value;
}

}  // namespace accelopt_optimize
