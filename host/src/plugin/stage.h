// stage.h - what the executor needs to know about a runnable stage.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace accelopt {

/// Everything a stage invocation gets from the executor.
struct StageInvocation {
  std::string stage_id;            // e.g. "profile" or "profile[3]"
  nlohmann::json with;             // resolved parameters (object)
  nlohmann::json vars;             // resolved pipeline vars (object)
  std::filesystem::path stage_dir; // created before the call; the stage's own files
  std::filesystem::path run_dir;
  int64_t timeout_ms = 0;          // 0 = none
  /// Set by the executor on Ctrl-C or timeout; stages should poll it.
  std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
  /// Log sink (level as spdlog: 0 trace .. 4 error), already prefixed.
  std::function<void(int, const std::string&)> log;
  /// Item progress for the live progress line.
  std::function<void(int64_t done, int64_t total, const std::string& label)> progress;
};

/// A registered stage: native plugin stage or Lua script.
class Stage {
 public:
  virtual ~Stage() = default;
  /// "native:<name>" or "lua:<path as written>".
  virtual std::string Uses() const = 0;
  virtual std::string Description() const = 0;
  /// {param: {type, required, default, doc, enum?}} (pipeline/param_check.h).
  virtual nlohmann::json Params() const = 0;
  /// The declared output fields {field: {type, doc, enum?}} (docs/plugins.md);
  /// {} when the stage declares none (then references are not checked).
  virtual nlohmann::json Outputs() const { return nlohmann::json::object(); }
  /// Where it comes from (plugin .so path or script path).
  virtual std::string Origin() const = 0;
  /// Runs once. Returns outputs; throws StageError on failure.
  virtual nlohmann::json Run(const StageInvocation& invocation) const = 0;
};

}  // namespace accelopt
