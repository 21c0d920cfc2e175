#include "support/test_support.h"

#include <array>
#include <cstdio>
#include <fstream>
#include <random>
#include <sys/wait.h>

namespace accelopt::testing {

TempDir::TempDir() {
  std::random_device rd;
  path_ = std::filesystem::temp_directory_path() / ("accelopt-test-" + std::to_string(rd()) + std::to_string(rd()));
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::filesystem::path TempDir::Write(const std::string& relative, const std::string& content) const {
  auto full = path_ / relative;
  std::filesystem::create_directories(full.parent_path());
  std::ofstream(full, std::ios::binary) << content;
  return full;
}

static std::string ShellQuote(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

CommandResult RunHost(const std::vector<std::string>& args, const std::filesystem::path& cwd) {
  return RunHostWithEnv({}, args, cwd);
}

CommandResult RunHostWithEnv(const std::vector<std::string>& env, const std::vector<std::string>& args,
                             const std::filesystem::path& cwd) {
  std::string command;
  if (!cwd.empty()) command += "cd " + ShellQuote(cwd.string()) + " && ";
  if (!env.empty()) {
    command += "env";
    for (const auto& assignment : env) command += " " + ShellQuote(assignment);
    command += " ";
  }
  command += ShellQuote(ACCELOPT_HOST_BINARY);
  for (const auto& arg : args) command += " " + ShellQuote(arg);
  command += " 2>&1";
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

nlohmann::json ReadJson(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::filesystem::path SourcePath(const std::string& relative) {
  return std::filesystem::path(ACCELOPT_TEST_DIR).parent_path() / relative;
}

}  // namespace accelopt::testing
