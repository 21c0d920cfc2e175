// plugins/optimize/source_text.h - kernel source text helpers: normalization
// for duplicate detection, hashing, the import header, changed regions.
// Pure functions without the plugin SDK (compiled into the tests as well:
// tests/host/optimize/source_text_test.cc).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace accelopt_optimize {

/// Source normalized for duplicate detection: '#' comments (outside string
/// literals), docstring-only statements and all whitespace removed.
std::string NormalizeSource(const std::string& source);
/// 16 hex digits of FNV-1a 64 over `text`.
std::string HashHex(const std::string& text);

/// Adds the legacy NKI import header when `source` imports neither neuronxcc nor nki.
std::string WithImportHeader(const std::string& source);

/// The changed region of old -> new: common leading/trailing lines are dropped and
/// each side is cut to `max_lines` lines. {"before": text, "after": text}.
nlohmann::json ChangedRegion(const std::string& before, const std::string& after, int max_lines = 14);

}  // namespace accelopt_optimize
