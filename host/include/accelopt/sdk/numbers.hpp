// accelopt/sdk/numbers.hpp - reading numbers out of stage JSON and writing them
// into reports, the same way in every plugin.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace accelopt::sdk {

/// object[key] when it is a number; nullopt for null, absent, non-numbers and non-objects.
inline std::optional<double> Number(const nlohmann::json& object, const std::string& key) {
  if (!object.is_object()) return std::nullopt;
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

/// `value` with `digits` decimals ("1.234" for Fixed(1.2344)); "nan"/"inf" as printf writes them.
inline std::string Fixed(double value, int digits = 3) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, value);
  return buffer;
}

}  // namespace accelopt::sdk
