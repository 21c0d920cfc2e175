#include "common.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

namespace accelopt_optimize {

// ---- misc -------------------------------------------------------------------

json ErrorJson(const std::exception& error, const std::string& default_kind) {
  if (const auto* failure = dynamic_cast<const StageFailure*>(&error)) {
    return {{"kind", failure->kind}, {"message", failure->what()}};
  }
  return {{"kind", default_kind}, {"message", error.what()}};
}

std::string Significant(double value, int digits) {
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

}  // namespace accelopt_optimize
