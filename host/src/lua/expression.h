// lua/expression.h - `${{ ... }}` pipeline expressions: one Lua expression
// evaluated in a fresh sandbox whose globals are the keys of a JSON context
// (read-only, converted lazily on access) plus a few builtins. The language
// is documented in docs/lua-stages.md ("Expressions").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "lua/sandbox.h"

namespace accelopt::lua {

/// Evaluates `expression` (the text between `${{` and `}}`, without them) as
/// `return (<expression>)` and converts the value to JSON: integers stay
/// integers, floats stay floats, nil and `null` become null, context values
/// come back unchanged.
///
/// Each key of `context` (a JSON object) is a read-only global; keys starting
/// with "__" are hidden, and `__status` ("success" | "failure" | "cancelled",
/// default "success") drives success()/failure()/cancelled(). Reading an
/// unknown global is an error that names it. The context is not copied:
/// objects and arrays are exposed as lazy views, so the cost does not grow
/// with the size of the context.
///
/// Throws LuaError with kind "syntax_error", "script_error", "timeout",
/// "out_of_memory" or "bad_output". what() is the bare message without the
/// expression text or a chunk prefix (the caller knows where the expression
/// came from), e.g. "unexpected symbol near <eof>" or "attempt to index a nil
/// value (field 'nope')"; for multi-line expressions it starts with
/// "line N: ". `limits` default to 16 MiB of heap and 1000 ms. `hooks`
/// (optional, must outlive the call) lends a cancel flag: when
/// `hooks->cancelled()` returns true the evaluation stops with kind
/// "cancelled". Logging and file hooks are ignored (expressions have neither).
nlohmann::json EvaluateExpression(std::string_view expression, const nlohmann::json& context,
                                  const Limits& limits = kExpressionLimits, const HostHooks* hooks = nullptr);

/// Compiles `expression` without running it. Returns std::nullopt if it is a
/// single valid Lua expression, else the compiler's message without the
/// chunk prefix (e.g. "unexpected symbol near <eof>"). Never throws LuaError.
std::optional<std::string> CheckExpressionSyntax(std::string_view expression);

}  // namespace accelopt::lua
