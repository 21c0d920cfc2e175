// accelopt/sdk/records.hpp - rules about the candidate records the optimize,
// search and profile plugins exchange (docs/optimize.md, "Candidates and records").
#pragma once

#include <nlohmann/json.hpp>

namespace accelopt::sdk {

/// True when a scored record (a beam member, an incumbent, a best kernel, a report's
/// winner) may stand as a result: its `validation` is "full" or "confirmed", or absent
/// (baselines, fixer re-profiles). A "screened" record, checked on native:profile's
/// screen seeds only and not confirmed, may not (docs/search.md, "Screen, then confirm").
inline bool ValidatedForResult(const nlohmann::json& record) {
  if (!record.is_object()) return true;
  const auto it = record.find("validation");
  return it == record.end() || !it->is_string() || *it != "screened";
}

}  // namespace accelopt::sdk
