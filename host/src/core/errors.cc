#include "core/errors.h"

namespace accelopt {

std::string SourceLocation::ToString() const {
  std::string out = file.empty() ? "<input>" : file;
  if (line > 0) {
    out += ":" + std::to_string(line);
    if (column > 0) out += ":" + std::to_string(column);
  }
  return out;
}

std::string Diagnostic::ToString() const { return where.ToString() + ": error: " + message; }

static std::string JoinDiagnostics(const std::vector<Diagnostic>& diagnostics) {
  std::string out;
  for (const auto& d : diagnostics) {
    if (!out.empty()) out += "\n";
    out += d.ToString();
  }
  return out;
}

ConfigError::ConfigError(std::vector<Diagnostic> diagnostics)
    : std::runtime_error(JoinDiagnostics(diagnostics)), diagnostics_(std::move(diagnostics)) {}

ConfigError::ConfigError(const SourceLocation& where, const std::string& message)
    : ConfigError(std::vector<Diagnostic>{{where, message}}) {}

StageError::StageError(std::string kind, const std::string& message, nlohmann::json details)
    : std::runtime_error(message), kind_(std::move(kind)), details_(std::move(details)) {}

nlohmann::json StageError::ToJson() const {
  return {{"kind", kind_}, {"message", what()}, {"details", details_}};
}

}  // namespace accelopt
