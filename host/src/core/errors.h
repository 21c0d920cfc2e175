// errors.h - the host's error types.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace accelopt {

/// A position in a user file (1-based line and column; 0 = unknown).
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
  /// "file:line:col" (omits unknown parts).
  std::string ToString() const;
};

/// One user-facing problem: `file:line:col: error: message`.
struct Diagnostic {
  SourceLocation where;
  std::string message;
  std::string ToString() const;
};

/// Bad pipeline, bad flag or bad plugin: exit code 2. Holds every
/// diagnostic found (validation reports all problems, not just the first).
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(std::vector<Diagnostic> diagnostics);
  ConfigError(const SourceLocation& where, const std::string& message);
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

/// A stage (or one item of it) failed. `kind` is from the error taxonomy
/// in docs/pipelines.md (timeout, script_error, python_error, ...).
class StageError : public std::runtime_error {
 public:
  StageError(std::string kind, const std::string& message, nlohmann::json details = nullptr);
  const std::string& kind() const { return kind_; }
  const nlohmann::json& details() const { return details_; }
  nlohmann::json ToJson() const;

 private:
  std::string kind_;
  nlohmann::json details_;
};

}  // namespace accelopt
