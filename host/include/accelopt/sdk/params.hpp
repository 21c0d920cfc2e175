// accelopt/sdk/params.hpp - typed access to a stage's `with:` parameters.
//
// A parameter's default is written once, in the stage's declared schema
// (params_json). The host applies those defaults before it runs the stage;
// these accessors fall back to the same schema when a value is absent (a
// caller that bypassed the host, a null in `with`), so stage code never
// restates a default.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "accelopt/sdk/failure.hpp"

namespace accelopt::sdk {

/// The value of parameter `name`: `with[name]` unless it is absent or null, else
/// the `default` of `schema[name]`, else nullptr. `with` and `schema` are objects
/// (anything else counts as empty).
inline const nlohmann::json* FindParam(const nlohmann::json& with, const nlohmann::json& schema,
                                       const std::string& name) {
  if (with.is_object()) {
    auto it = with.find(name);
    if (it != with.end() && !it->is_null()) return &*it;
  }
  if (schema.is_object()) {
    auto spec = schema.find(name);
    if (spec != schema.end() && spec->is_object()) {
      auto def = spec->find("default");
      if (def != spec->end() && !def->is_null()) return &*def;
    }
  }
  return nullptr;
}

/// `value` (parameter `name`) as T. Integral T needs a whole number in T's range;
/// std::string a string; bool a boolean; nlohmann::json anything. Throws
/// StageFailure{config_error, details {"parameter", "value"}} otherwise.
template <typename T>
T ConvertParam(const nlohmann::json& value, const std::string& name) {
  auto bad = [&](const std::string& expected) {
    return StageFailure("config_error",
                        "parameter `" + name + "` must be " + expected + ", got " + std::string(value.type_name()) +
                            " " + value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                        {{"parameter", name}, {"value", value}});
  };
  if constexpr (std::is_same_v<T, nlohmann::json>) {
    return value;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!value.is_boolean()) throw bad("a boolean");
    return value.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (value.is_number_unsigned()) {
      const uint64_t v = value.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) throw bad("an integer in range");
      return static_cast<T>(v);
    }
    if (value.is_number_integer()) {
      const int64_t v = value.get<int64_t>();
      const bool out = std::is_unsigned_v<T> ? v < 0 || static_cast<uint64_t>(v) > std::numeric_limits<T>::max()
                                             : v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
                                                   v > static_cast<int64_t>(std::numeric_limits<T>::max());
      if (out) throw bad("an integer in range");
      return static_cast<T>(v);
    }
    if (value.is_number_float() && std::floor(value.get<double>()) == value.get<double>() &&
        value.get<double>() >= static_cast<double>(std::numeric_limits<T>::min()) &&
        value.get<double>() <= static_cast<double>(std::numeric_limits<T>::max())) {
      return static_cast<T>(value.get<double>());
    }
    throw bad("an integer");
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!value.is_number()) throw bad("a number");
    return value.get<T>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!value.is_string()) throw bad("a string");
    return value.get<std::string>();
  } else {
    try {
      return value.get<T>();
    } catch (const nlohmann::json::exception&) {
      throw bad("convertible to the type the stage expects");
    }
  }
}

/// Parameter `name` as T (see FindParam, ConvertParam). Throws
/// StageFailure{config_error} when it has neither a value nor a schema default,
/// or when the value does not convert.
template <typename T>
T GetParam(const nlohmann::json& with, const nlohmann::json& schema, const std::string& name) {
  const nlohmann::json* value = FindParam(with, schema, name);
  if (value == nullptr) {
    throw StageFailure("config_error", "parameter `" + name + "` is required (it has no value and no default)",
                       {{"parameter", name}});
  }
  return ConvertParam<T>(*value, name);
}

/// Parameter `name` as T, or nullopt when it has neither a value nor a schema
/// default. Throws StageFailure{config_error} when the value does not convert.
template <typename T>
std::optional<T> GetOptionalParam(const nlohmann::json& with, const nlohmann::json& schema, const std::string& name) {
  const nlohmann::json* value = FindParam(with, schema, name);
  if (value == nullptr) return std::nullopt;
  return ConvertParam<T>(*value, name);
}

/// A list parameter that may also be given as null (empty) or as the producing
/// stage's whole outputs object holding the list under `key`
/// (`records: ${{ stages.score.outputs }}`). Anything else: an empty array.
inline nlohmann::json ListParam(const nlohmann::json& value, const std::string& key) {
  if (value.is_array()) return value;
  if (value.is_object()) {
    const auto it = value.find(key);
    if (it != value.end() && it->is_array()) return *it;
  }
  return nlohmann::json::array();
}

}  // namespace accelopt::sdk
