// run_dir.h - the directory that holds everything one run produced.
//
//   runs/<UTC yyyymmdd-HHMMSS>-<pipeline name>/
//     pipeline.resolved.yaml   the pipeline after --set overrides
//     run.json                 versions, argv, status, timings
//     stages/<NN>-<id>/...     inputs.json, outputs.json, status.json, log.txt
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace accelopt {

class RunDirectory {
 public:
  /// Uses `explicit_dir` if non-empty (created if needed), else makes
  /// `<base>/<timestamp>-<name>` (a numeric suffix avoids collisions).
  /// Throws std::runtime_error if the directory cannot be created.
  static RunDirectory Create(const std::filesystem::path& explicit_dir, const std::string& name,
                             const std::filesystem::path& base = "runs");

  const std::filesystem::path& path() const { return path_; }

  /// Atomically writes `relative` (temp file + rename); creates folders.
  void WriteText(const std::filesystem::path& relative, std::string_view text) const;
  void WriteJson(const std::filesystem::path& relative, const nlohmann::json& value) const;

 private:
  explicit RunDirectory(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

/// Current UTC time as ISO-8601 ("2026-11-22T10:15:30Z").
std::string UtcNowIso();

}  // namespace accelopt
