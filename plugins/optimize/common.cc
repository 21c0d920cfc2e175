#include "common.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

namespace accelopt_optimize {

json ListParam(const json& value, const std::string& key) {
  if (value.is_array()) return value;
  if (value.is_object() && value.contains(key) && value[key].is_array()) return value[key];
  return json::array();
}

// ---- misc -------------------------------------------------------------------

void ParallelFor(size_t n, int threads, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) fn(i);
  };
  int count = std::max(1, std::min<int>(threads, static_cast<int>(n)));
  std::vector<std::thread> pool;
  for (int t = 1; t < count; ++t) pool.emplace_back(worker);
  worker();
  for (auto& thread : pool) thread.join();
}

json ErrorJson(const std::exception& error, const std::string& default_kind) {
  if (const auto* failure = dynamic_cast<const StageFailure*>(&error)) {
    return {{"kind", failure->kind}, {"message", failure->what()}};
  }
  return {{"kind", default_kind}, {"message", error.what()}};
}

bool ValidatedForResult(const json& record) {
  const json validation = record.is_object() ? record.value("validation", json()) : json();
  return !validation.is_string() || validation != "screened";
}

std::optional<double> Number(const json& object, const std::string& key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number()) return std::nullopt;
  return object[key].get<double>();
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

std::string Fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, value);
  return buffer;
}

}  // namespace accelopt_optimize
