// expressions.h - `${{ expr }}` in pipeline values.
//
// A string that is exactly one `${{ expr }}` becomes the expression's JSON
// value (numbers stay numbers, lists stay lists); expressions inside a longer
// string are interpolated as text. Expressions are Lua expressions evaluated
// read-only in the Lua sandbox (lua/expression.h).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace accelopt {

/// One `${{ ... }}` occurrence in a string: [begin, end) covers the braces.
struct ExpressionSpan {
  size_t begin = 0;
  size_t end = 0;
  std::string code;  // trimmed inner text
};

/// Finds every expression in `text`. An unterminated `${{` is reported as
/// an expression with end == npos.
std::vector<ExpressionSpan> FindExpressions(const std::string& text);

/// True if `value` (recursively) contains any `${{`.
bool ContainsExpression(const nlohmann::json& value);

/// What the expressions of one stage may spend. Each expression always runs
/// in its own sandbox under lua::kExpressionLimits (16 MiB of Lua heap, and
/// 1 s); a budget also ends it at the stage's deadline and on cancel.
struct ExpressionBudget {
  /// The stage's deadline (its timeout counted from when the stage started);
  /// time_point::max() = none.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  /// The stage's timeout in ms, for messages (0 = none).
  int64_t timeout_ms = 0;
  /// Polled while an expression runs (Ctrl-C); may be empty.
  std::function<bool()> cancelled;
};

/// Resolves every expression in `value` against `context` (an object whose
/// keys are the expression's globals). Throws StageError naming `where` and
/// the failing expression: kind "expression_error", or "timeout" when the
/// budget's deadline ends an expression (or has passed before one starts),
/// or "cancelled" when the budget's cancel flag is raised.
nlohmann::json ResolveValue(const nlohmann::json& value, const nlohmann::json& context, const SourceLocation& where,
                            const ExpressionBudget* budget = nullptr);

/// Evaluates a condition (`if`, `until`): either `${{ expr }}` or a bare
/// expression. Lua truthiness: only false and null are false.
bool EvaluateCondition(const std::string& text, const nlohmann::json& context, const SourceLocation& where);

/// Syntax-checks every expression in `value`; appends diagnostics.
void CheckExpressions(const nlohmann::json& value, const SourceLocation& where, std::vector<Diagnostic>* diagnostics);

/// Syntax-checks a condition text (bare or wrapped).
void CheckCondition(const std::string& text, const SourceLocation& where, std::vector<Diagnostic>* diagnostics);

/// Every `stages.<id>` the expressions in `value` refer to.
std::vector<std::string> ReferencedStages(const nlohmann::json& value);

}  // namespace accelopt
