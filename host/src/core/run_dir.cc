#include "core/run_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>
#include <stdexcept>
#include <vector>

#include "accelopt/sdk/nofollow.hpp"

namespace accelopt {
namespace {

std::string UtcStamp(const char* format) {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[64];
  std::strftime(buffer, sizeof(buffer), format, &tm);
  return buffer;
}

std::string SafeName(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return out.empty() ? "run" : out;
}

namespace nofollow = sdk::nofollow;

}  // namespace

std::string UtcNowIso() { return UtcStamp("%Y-%m-%dT%H:%M:%SZ"); }

std::filesystem::path EnsurePrivateDir(const std::filesystem::path& base, const std::filesystem::path& relative,
                                       unsigned mode) {
  nofollow::EnsureDir(base, relative, mode);
  auto parts = nofollow::Components(relative);
  return parts.empty() ? base : base / relative.lexically_normal();
}

std::filesystem::path EnsurePrivateDir(const std::filesystem::path& path) {
  std::filesystem::path normal = path.lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();
  std::filesystem::path parent = normal.parent_path().empty() ? std::filesystem::path(".") : normal.parent_path();
  EnsurePrivateDir(parent, normal.filename(), 0700);
  return normal;
}

int OpenForAppendNoFollow(const std::filesystem::path& base, const std::filesystem::path& relative) {
  return nofollow::OpenAppend(base, relative);
}

void AppendNoFollow(const std::filesystem::path& base, const std::filesystem::path& relative, std::string_view text) {
  nofollow::Append(base, relative, text);
}

void WriteFileNoFollow(const std::filesystem::path& base, const std::filesystem::path& relative, std::string_view text) {
  nofollow::WriteAtomic(base, relative, text);
}

bool RemoveNoFollow(const std::filesystem::path& base, const std::filesystem::path& relative) {
  return nofollow::Remove(base, relative);
}

int OpenForReadNoFollow(const std::filesystem::path& base, const std::filesystem::path& relative) {
  return nofollow::OpenRead(base, relative);
}

RunDirectory RunDirectory::Create(const std::filesystem::path& explicit_dir, const std::string& name,
                                  const std::filesystem::path& base) {
  std::filesystem::path dir = explicit_dir;
  if (dir.empty()) {
    std::string stem = UtcStamp("%Y%m%d-%H%M%S") + "-" + SafeName(name);
    dir = base / stem;
    for (int i = 2; std::filesystem::exists(dir); ++i) dir = base / (stem + "-" + std::to_string(i));
  }
  dir = std::filesystem::absolute(dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  // Folders above the run directory are the user's; the run directory itself must be a real one.
  std::filesystem::create_directories(dir.parent_path());
  EnsurePrivateDir(dir.parent_path(), dir.filename(), 0755);
  return RunDirectory(dir);
}

std::filesystem::path RunDirectory::Relative(const std::filesystem::path& path) const {
  if (!path.is_absolute()) return path;
  std::filesystem::path rel = path.lexically_normal().lexically_relative(path_);
  if (rel.empty() || *rel.begin() == "..") throw nofollow::Failure(path, "is outside the run directory " + path_.string());
  return rel;
}

void RunDirectory::WriteText(const std::filesystem::path& relative, std::string_view text) const {
  WriteFileNoFollow(path_, Relative(relative), text);
}

void RunDirectory::WriteJson(const std::filesystem::path& relative, const nlohmann::json& value) const {
  // Invalid UTF-8 (which should not reach here) is replaced, never a crash.
  WriteText(relative, value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

std::filesystem::path RunDirectory::EnsureDir(const std::filesystem::path& relative) const {
  return EnsurePrivateDir(path_, Relative(relative), 0755);
}

}  // namespace accelopt
