#include "pipeline/param_check.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/text.h"

namespace accelopt {
namespace {

const std::vector<std::string> kTypes = {"string", "integer", "number", "boolean", "array", "object", "any"};

std::string Shown(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.size() > 200 ? text.substr(0, 200) + "..." : text;
}

}  // namespace

bool MatchesParamType(const nlohmann::json& value, const std::string& type) {
  if (type.empty() || type == "any") return true;
  if (type == "string") return value.is_string();
  if (type == "integer") return value.is_number_integer();
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "array") return value.is_array();
  if (type == "object") return value.is_object();
  return false;
}

std::optional<std::string> CheckParamValue(const nlohmann::json& value, const nlohmann::json& spec) {
  std::string type = spec.is_object() ? spec.value("type", "any") : "any";
  if (!MatchesParamType(value, type)) {
    return "must be of type " + type + ", got " + std::string(value.type_name()) + " " + Shown(value);
  }
  if (spec.is_object() && value.is_number()) {
    if (spec.contains("minimum") && spec["minimum"].is_number() && value.get<double>() < spec["minimum"].get<double>())
      return "must be >= " + Shown(spec["minimum"]) + ", got " + Shown(value);
    if (spec.contains("maximum") && spec["maximum"].is_number() && value.get<double>() > spec["maximum"].get<double>())
      return "must be <= " + Shown(spec["maximum"]) + ", got " + Shown(value);
  }
  if (spec.is_object() && spec.contains("path") && value.is_string()) {
    const std::string kind = spec.value("path", "");
    std::error_code error;
    const std::filesystem::path path = value.get<std::string>();
    const bool ok = kind == "dir" ? std::filesystem::is_directory(path, error) : std::filesystem::is_regular_file(path, error);
    if (!ok) {
      return std::string("must name an existing ") + (kind == "dir" ? "directory" : "file") + ", got " + Shown(value) +
             (std::filesystem::exists(path, error) ? " (not a " + std::string(kind == "dir" ? "directory" : "regular file") + ")"
                                                   : " (no such " + std::string(kind == "dir" ? "directory" : "file") + ")");
    }
  }
  if (spec.is_object() && spec.contains("enum") && spec["enum"].is_array()) {
    const auto& choices = spec["enum"];
    if (std::find(choices.begin(), choices.end(), value) != choices.end()) return std::nullopt;
    std::string listed;
    std::vector<std::string> names;
    for (const auto& choice : choices) {
      std::string text = choice.is_string() ? choice.get<std::string>() : Shown(choice);
      listed += (listed.empty() ? "" : ", ") + text;
      names.push_back(text);
    }
    std::string suffix = value.is_string() ? DidYouMeanSuffix(value.get<std::string>(), names) : "";
    return "must be one of " + listed + ", got " + Shown(value) + suffix;
  }
  return std::nullopt;
}

std::optional<std::string> CheckParamKeys(const nlohmann::json& value, const nlohmann::json& spec,
                                          const nlohmann::json& with) {
  if (!spec.is_object() || !spec.contains("keys_of") || !spec["keys_of"].is_object()) return std::nullopt;
  const auto& keys_of = spec["keys_of"];
  const std::string param = keys_of.value("param", ""), file = keys_of.value("file", "");
  if (!with.is_object() || !with.contains(param) || !with[param].is_string() || file.empty()) return std::nullopt;
  const std::filesystem::path path = std::filesystem::path(with[param].get<std::string>()) / file;
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error) || std::filesystem::file_size(path, error) > (16u << 20)) return std::nullopt;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json object = nlohmann::json::parse(text.str(), nullptr, false);
  if (!object.is_object()) return std::nullopt;
  std::vector<std::string> known;
  for (const auto& [key, _] : object.items()) known.push_back(key);
  const nlohmann::json names = value.is_array() ? value : nlohmann::json::array({value});
  for (const auto& name : names) {
    if (!name.is_string() || object.contains(name.get<std::string>())) continue;
    std::string listed;
    for (const auto& key : known) listed += (listed.empty() ? "" : ", ") + key;
    return "names '" + name.get<std::string>() + "', which is not in " + path.string() +
           DidYouMeanSuffix(name.get<std::string>(), known) + "; it has: " + (listed.empty() ? "nothing" : listed);
  }
  return std::nullopt;
}

std::string ParamProblemMessage(const std::string& name, const std::string& uses, const std::string& problem,
                                const std::string& expression) {
  return "parameter '" + name + "' of " + uses + " " + problem + (expression.empty() ? "" : " (from " + expression + ")");
}

std::string MissingParamMessage(const std::string& name, const std::string& uses, const std::string& expression) {
  return "required parameter '" + name + "' of " + uses + " is missing" +
         (expression.empty() ? "" : ": " + expression + " resolved to null");
}

std::vector<std::string> CheckSchema(const nlohmann::json& schema, const std::string& what) {
  std::vector<std::string> problems;
  if (!schema.is_object()) return {what + " must be an object of entries by name"};
  const bool outputs = what == "outputs";
  const std::vector<std::string> fields =
      outputs ? std::vector<std::string>{"type", "doc", "enum"}
              : std::vector<std::string>{"type", "required", "default", "doc", "enum", "minimum", "maximum", "path", "keys_of"};
  for (const auto& [name, spec] : schema.items()) {
    const std::string at = what + "." + name;
    if (!spec.is_object()) {
      problems.push_back(at + ": must be an object {type, doc, ...}");
      continue;
    }
    for (const auto& [field, value] : spec.items()) {
      if (std::find(fields.begin(), fields.end(), field) == fields.end()) {
        std::string expected;
        for (const auto& f : fields) expected += (expected.empty() ? "" : ", ") + f;
        problems.push_back(at + "." + field + ": unknown field" + DidYouMeanSuffix(field, fields) + " (expected " + expected + ")");
      }
    }
    std::string type = "any";
    if (spec.contains("type")) {
      const auto& t = spec["type"];
      if (!t.is_string() || std::find(kTypes.begin(), kTypes.end(), t.get<std::string>()) == kTypes.end()) {
        problems.push_back(at + ".type: must be one of string, integer, number, boolean, array, object, any");
      } else {
        type = t.get<std::string>();
      }
    }
    if (spec.contains("required") && !spec["required"].is_boolean()) problems.push_back(at + ".required: must be a boolean");
    if (spec.contains("doc") && !spec["doc"].is_string()) problems.push_back(at + ".doc: must be a string");
    for (const char* bound : {"minimum", "maximum"})
      if (spec.contains(bound) && !spec[bound].is_number()) problems.push_back(at + "." + bound + ": must be a number");
    if (spec.contains("path") && spec["path"] != "dir" && spec["path"] != "file")
      problems.push_back(at + ".path: must be \"dir\" or \"file\"");
    if (spec.contains("keys_of") && (!spec["keys_of"].is_object() || !spec["keys_of"].value("param", nlohmann::json()).is_string() ||
                                     !spec["keys_of"].value("file", nlohmann::json()).is_string()))
      problems.push_back(at + ".keys_of: must be {\"param\": <parameter name>, \"file\": <file name>}");
    if (spec.contains("enum")) {
      const auto& choices = spec["enum"];
      if (!choices.is_array() || choices.empty()) {
        problems.push_back(at + ".enum: must be a non-empty list of the allowed values");
      } else {
        for (const auto& choice : choices) {
          if (!MatchesParamType(choice, type)) {
            problems.push_back(at + ".enum: value " + Shown(choice) + " is not of type " + type);
          }
        }
        if (spec.contains("default") && std::find(choices.begin(), choices.end(), spec["default"]) == choices.end()) {
          problems.push_back(at + ".default: " + Shown(spec["default"]) + " is not one of the enum values");
        }
      }
    }
  }
  return problems;
}

}  // namespace accelopt
