#include "pipeline/expressions.h"

#include <regex>

#include "lua/expression.h"

namespace accelopt {
namespace {

std::string Trim(const std::string& text) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  size_t last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

nlohmann::json Evaluate(const std::string& code, const nlohmann::json& context, const SourceLocation& where,
                        const ExpressionBudget* budget = nullptr) {
  lua::Limits limits = lua::kExpressionLimits;
  bool stage_deadline_binds = false;
  lua::HostHooks hooks;
  if (budget != nullptr) {
    hooks.cancelled = budget->cancelled;
    if (budget->deadline != std::chrono::steady_clock::time_point::max()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(budget->deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        throw StageError("timeout", where.ToString() + ": stage exceeded its timeout of " + std::to_string(budget->timeout_ms) +
                                        " ms while resolving ${{ " + code + " }}");
      }
      if (left < limits.timeout) {
        limits.timeout = left;
        stage_deadline_binds = true;
      }
    }
  }
  try {
    return lua::EvaluateExpression(code, context, limits, &hooks);
  } catch (const lua::LuaError& error) {
    if (error.kind == "timeout" && stage_deadline_binds) {
      throw StageError("timeout", where.ToString() + ": stage exceeded its timeout of " + std::to_string(budget->timeout_ms) +
                                      " ms in ${{ " + code + " }}");
    }
    if (error.kind == "cancelled") throw StageError("cancelled", where.ToString() + ": cancelled in ${{ " + code + " }}");
    throw StageError("expression_error", where.ToString() + ": error in ${{ " + code + " }}: " + error.what());
  }
}

// The code of a condition: "${{ x }}" → "x"; a bare "x" stays as is.
std::string ConditionCode(const std::string& text) {
  auto spans = FindExpressions(text);
  if (spans.size() == 1 && spans[0].begin == 0 && spans[0].end == Trim(text).size()) return spans[0].code;
  return Trim(text);
}

}  // namespace

std::vector<ExpressionSpan> FindExpressions(const std::string& text) {
  std::vector<ExpressionSpan> spans;
  size_t pos = 0;
  while ((pos = text.find("${{", pos)) != std::string::npos) {
    size_t close = text.find("}}", pos + 3);
    if (close == std::string::npos) {
      spans.push_back({pos, std::string::npos, Trim(text.substr(pos + 3))});
      break;
    }
    spans.push_back({pos, close + 2, Trim(text.substr(pos + 3, close - pos - 3))});
    pos = close + 2;
  }
  return spans;
}

bool ContainsExpression(const nlohmann::json& value) {
  if (value.is_string()) return value.get_ref<const std::string&>().find("${{") != std::string::npos;
  if (value.is_structured()) {
    for (const auto& child : value) {
      if (ContainsExpression(child)) return true;
    }
  }
  return false;
}

nlohmann::json ResolveValue(const nlohmann::json& value, const nlohmann::json& context, const SourceLocation& where,
                            const ExpressionBudget* budget) {
  if (value.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [key, child] : value.items()) out[key] = ResolveValue(child, context, where, budget);
    return out;
  }
  if (value.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& child : value) out.push_back(ResolveValue(child, context, where, budget));
    return out;
  }
  if (!value.is_string()) return value;
  const std::string& text = value.get_ref<const std::string&>();
  auto spans = FindExpressions(text);
  if (spans.empty()) return value;
  for (const auto& span : spans) {
    if (span.end == std::string::npos) throw StageError("expression_error", where.ToString() + ": unterminated '${{' in '" + text + "'");
  }
  // Exactly one expression and nothing else: keep the JSON type.
  if (spans.size() == 1 && Trim(text.substr(0, spans[0].begin)).empty() && Trim(text.substr(spans[0].end)).empty()) {
    return Evaluate(spans[0].code, context, where, budget);
  }
  std::string out;
  size_t cursor = 0;
  for (const auto& span : spans) {
    out += text.substr(cursor, span.begin - cursor);
    nlohmann::json result = Evaluate(span.code, context, where, budget);
    out += result.is_string() ? result.get<std::string>() : result.dump();
    cursor = span.end;
  }
  return out + text.substr(cursor);
}

bool EvaluateCondition(const std::string& text, const nlohmann::json& context, const SourceLocation& where) {
  nlohmann::json result = Evaluate(ConditionCode(text), context, where);
  return !(result.is_null() || (result.is_boolean() && !result.get<bool>()));
}

void CheckExpressions(const nlohmann::json& value, const SourceLocation& where, std::vector<Diagnostic>* diagnostics) {
  if (value.is_structured()) {
    for (const auto& child : value) CheckExpressions(child, where, diagnostics);
    return;
  }
  if (!value.is_string()) return;
  for (const auto& span : FindExpressions(value.get<std::string>())) {
    if (span.end == std::string::npos) {
      diagnostics->push_back({where, "unterminated '${{' (expected '}}')"});
    } else if (auto error = lua::CheckExpressionSyntax(span.code)) {
      diagnostics->push_back({where, "bad expression '${{ " + span.code + " }}': " + *error});
    }
  }
}

void CheckCondition(const std::string& text, const SourceLocation& where, std::vector<Diagnostic>* diagnostics) {
  if (Trim(text).empty()) return;
  std::string code = ConditionCode(text);
  if (auto error = lua::CheckExpressionSyntax(code)) {
    diagnostics->push_back({where, "bad condition '" + code + "': " + *error});
  }
}

std::vector<std::string> ReferencedStages(const nlohmann::json& value) {
  std::vector<std::string> ids;
  if (value.is_structured()) {
    for (const auto& child : value) {
      auto more = ReferencedStages(child);
      ids.insert(ids.end(), more.begin(), more.end());
    }
  } else if (value.is_string()) {
    static const std::regex kRef(R"(\b(?:stages|iter)\.([A-Za-z_][A-Za-z0-9_]*))");
    for (const auto& span : FindExpressions(value.get<std::string>())) {
      for (std::sregex_iterator it(span.code.begin(), span.code.end(), kRef), end; it != end; ++it) ids.push_back((*it)[1]);
    }
  }
  return ids;
}

}  // namespace accelopt
