// param_check.h - stage parameter and output schemas: checking a schema's
// shape, and checking a value against one parameter. `validate` (literal
// and statically known values) and the executor (values resolved at run
// time) share these functions, so both print the same messages.
//
// A schema is a JSON object {name: spec}; a parameter spec holds
//   "type": "string|integer|number|boolean|array|object|any" (default any),
//   "required": bool, "default": <json>, "doc": "...",
//   "enum": [<json>, ...]  (a closed set: the value must be one of them),
//   "minimum", "maximum": numbers (bounds of a number or integer value),
//   "path": "dir" | "file" (a string value names an existing directory or
//     regular file, relative to the working directory),
//   "keys_of": {"param": P, "file": F} (a string value, or each string of a
//     list value, is a key of the JSON object in file F of the directory the
//     parameter P names: e.g. a problem of <dir>/summary.json; checked when
//     both values are known, by `validate` and when the stage starts).
// An output spec holds "type", "doc" and optionally "enum".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace accelopt {

/// True if `value` has the JSON type named by `type` (string, integer,
/// number, boolean, array, object, any; "" counts as any).
bool MatchesParamType(const nlohmann::json& value, const std::string& type);

/// What is wrong with `value` for the parameter spec `spec`, or nullopt:
/// "must be of type integer, got string \"two\"", or
/// "must be one of full, small, all, got \"smal\" (did you mean 'small'?)".
/// A null value is reported by type like any other; callers check
/// `required` first (MissingParamMessage).
std::optional<std::string> CheckParamValue(const nlohmann::json& value, const nlohmann::json& spec);

/// What is wrong with `value` for a spec with "keys_of", given the stage's
/// other values `with` (those known so far), or nullopt: "names 'slu', which
/// is not in /b/summary.json (did you mean 'silu'?); it has: ...". Nothing is
/// reported when the spec has no keys_of, the other parameter is not a known
/// string or its file cannot be read as a JSON object (the path check says so).
std::optional<std::string> CheckParamKeys(const nlohmann::json& value, const nlohmann::json& spec,
                                          const nlohmann::json& with);

/// "parameter 'name' of <uses> <problem>", plus " (from <expression>)" when
/// the value came from an expression.
std::string ParamProblemMessage(const std::string& name, const std::string& uses, const std::string& problem,
                                const std::string& expression = "");

/// "required parameter 'name' of <uses> is missing", plus
/// ": <expression> resolved to null" when an expression gave null.
std::string MissingParamMessage(const std::string& name, const std::string& uses, const std::string& expression = "");

/// Problems with the shape of a schema (`what` is "params" or "outputs"):
/// entries that are not objects, unknown fields (with did-you-mean), a bad
/// type name, `enum` that is not a non-empty list or whose values do not
/// match the type, a default outside the enum. Empty when the schema is fine.
std::vector<std::string> CheckSchema(const nlohmann::json& schema, const std::string& what);

}  // namespace accelopt
