#include "pipeline/param_check.h"

#include <algorithm>

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
  const std::vector<std::string> fields = outputs ? std::vector<std::string>{"type", "doc", "enum"}
                                                  : std::vector<std::string>{"type", "required", "default", "doc", "enum"};
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
