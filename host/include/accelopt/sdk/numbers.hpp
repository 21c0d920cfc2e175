// accelopt/sdk/numbers.hpp - reading numbers out of stage JSON and writing them
// into reports, the same way in every plugin.
#pragma once

#include <algorithm>
#include <cmath>
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

/// `value` with `digits` significant figures, trailing zeros dropped, no exponent
/// between 1e-4 and 1e9 ("0.04692", "223.8", "1.5", "0"); exponent form outside.
inline std::string Significant(double value, int digits = 4) {
  if (value == 0.0 || !std::isfinite(value)) return value == 0.0 ? "0" : (std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf"));
  const double magnitude = std::fabs(value);
  char buffer[64];
  if (magnitude < 1e-4 || magnitude >= 1e9) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
    return buffer;
  }
  const int exponent = static_cast<int>(std::floor(std::log10(magnitude)));
  const int decimals = std::max(0, digits - 1 - exponent);
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, value);
  std::string text = buffer;
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  return text;
}

}  // namespace accelopt::sdk
