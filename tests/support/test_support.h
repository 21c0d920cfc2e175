// test_support.h - helpers shared by the C++ tests.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace accelopt::testing {

/// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  /// Writes `content` to path()/relative (creating folders); returns the full path.
  std::filesystem::path Write(const std::string& relative, const std::string& content) const;

 private:
  std::filesystem::path path_;
};

/// Result of running the accelopt-host binary.
struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

/// Runs the built accelopt-host with `args` (shell-quoted for you), in `cwd`.
CommandResult RunHost(const std::vector<std::string>& args, const std::filesystem::path& cwd = {});

/// RunHost with extra environment variables (`env`: "NAME=value" entries,
/// passed through env(1)).
CommandResult RunHostWithEnv(const std::vector<std::string>& env, const std::vector<std::string>& args,
                             const std::filesystem::path& cwd = {});

/// Parses a JSON file (e.g. a run's outputs.json).
nlohmann::json ReadJson(const std::filesystem::path& path);

/// Absolute path of a file in the source tree (e.g. "pipelines/x.yaml").
std::filesystem::path SourcePath(const std::string& relative);

}  // namespace accelopt::testing
