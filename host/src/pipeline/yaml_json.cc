#include "pipeline/yaml_json.h"

#include <cmath>
#include <regex>
#include <set>

namespace accelopt {

SourceLocation LocationOf(const YAML::Node& node, const std::string& file) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return {file, 0, 0};
  return {file, mark.line + 1, mark.column + 1};
}

nlohmann::json ScalarToJson(const YAML::Node& scalar) {
  const std::string& text = scalar.Scalar();
  if (scalar.Tag() == "!") return text;  // quoted: always a string
  static const std::regex kInt(R"([-+]?(0|[1-9][0-9]*))");
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") return nullptr;
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  if (std::regex_match(text, kInt)) {
    try {
      return std::stoll(text);
    } catch (...) {
      return text;
    }
  }
  if (std::regex_match(text, kFloat)) return std::stod(text);
  if (text == ".inf" || text == "+.inf") return HUGE_VAL;
  if (text == "-.inf") return -HUGE_VAL;
  return text;
}

void CheckDuplicateKeys(const YAML::Node& node, const std::string& file, std::vector<Diagnostic>* diagnostics) {
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      std::string key = it->first.IsScalar() ? it->first.Scalar() : "<complex key>";
      if (!seen.insert(key).second) {
        diagnostics->push_back({LocationOf(it->first, file), "duplicate key '" + key + "'"});
      }
      CheckDuplicateKeys(it->second, file, diagnostics);
    }
  } else if (node.IsSequence()) {
    for (const auto& child : node) CheckDuplicateKeys(child, file, diagnostics);
  }
}

nlohmann::json YamlToJson(const YAML::Node& node, const std::string& file, std::vector<Diagnostic>* diagnostics) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return ScalarToJson(node);
    case YAML::NodeType::Sequence: {
      auto out = nlohmann::json::array();
      for (const auto& child : node) out.push_back(YamlToJson(child, file, diagnostics));
      return out;
    }
    case YAML::NodeType::Map: {
      auto out = nlohmann::json::object();
      for (auto it = node.begin(); it != node.end(); ++it) {
        if (!it->first.IsScalar()) {
          diagnostics->push_back({LocationOf(it->first, file), "mapping keys must be plain strings"});
          continue;
        }
        out[it->first.Scalar()] = YamlToJson(it->second, file, diagnostics);
      }
      return out;
    }
  }
  return nullptr;
}

}  // namespace accelopt
