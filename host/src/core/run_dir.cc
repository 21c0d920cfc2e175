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

#include "core/unique_fd.h"

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

std::runtime_error Failure(const std::filesystem::path& path, const std::string& why) {
  return std::runtime_error(path.string() + ": " + why);
}

// The components of `relative`, checked: relative, no "..", no empty names.
std::vector<std::string> Components(const std::filesystem::path& relative) {
  if (relative.is_absolute()) throw Failure(relative, "expected a relative path");
  std::vector<std::string> parts;
  for (const auto& part : relative.lexically_normal()) {
    std::string name = part.string();
    if (name.empty() || name == ".") continue;
    if (name == "..") throw Failure(relative, "'..' is not allowed");
    parts.push_back(name);
  }
  return parts;
}

// Opens the directory `name` in `dir_fd` without following a symlink,
// creating it (with `mode`) if `create`. Throws naming `shown`.
int OpenDirAt(int dir_fd, const std::string& name, bool create, unsigned mode, const std::filesystem::path& shown) {
  if (create && ::mkdirat(dir_fd, name.c_str(), mode) != 0 && errno != EEXIST) {
    throw Failure(shown, std::string("cannot create: ") + std::strerror(errno));
  }
  int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return fd;
  int error = errno;
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) throw Failure(shown, "refusing a symlink (the host never follows symlinks inside a run directory)");
    if (!S_ISDIR(st.st_mode)) throw Failure(shown, "exists and is not a directory");
  }
  throw Failure(shown, std::string("cannot open: ") + std::strerror(error));
}

// Opens `base` (trusted) and walks `parts` under it; returns the last directory's fd.
int WalkDirs(const std::filesystem::path& base, const std::vector<std::string>& parts, size_t count, unsigned mode) {
  UniqueFd dir(::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) throw Failure(base, std::string("cannot open: ") + std::strerror(errno));
  std::filesystem::path shown = base;
  for (size_t i = 0; i < count; ++i) {
    shown /= parts[i];
    dir.Reset(OpenDirAt(dir.get(), parts[i], true, mode, shown));
  }
  return dir.Release();
}

}  // namespace

std::string UtcNowIso() { return UtcStamp("%Y-%m-%dT%H:%M:%SZ"); }

std::filesystem::path EnsurePrivateDir(const std::filesystem::path& base, const std::filesystem::path& relative,
                                       unsigned mode) {
  auto parts = Components(relative);
  UniqueFd dir(WalkDirs(base, parts, parts.size(), mode));
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
  auto parts = Components(relative);
  if (parts.empty()) throw Failure(relative, "expected a file name");
  UniqueFd dir(WalkDirs(base, parts, parts.size() - 1, 0755));
  int fd = ::openat(dir.get(), parts.back().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    int error = errno;
    throw Failure(base / relative, error == ELOOP ? "refusing a symlink (the host never follows symlinks inside a run directory)"
                                                  : std::string("cannot open: ") + std::strerror(error));
  }
  return fd;
}

void WriteFileNoFollow(const std::filesystem::path& base, const std::filesystem::path& relative, std::string_view text) {
  auto parts = Components(relative);
  if (parts.empty()) throw Failure(relative, "expected a file name");
  UniqueFd dir(WalkDirs(base, parts, parts.size() - 1, 0755));
  const std::string& name = parts.back();
  std::string tmp = "." + name + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::random_device{}());
  UniqueFd file(::openat(dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (file.get() < 0) throw Failure(base / relative, std::string("cannot write: ") + std::strerror(errno));
  const char* data = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(file.get(), data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int error = errno;
      ::unlinkat(dir.get(), tmp.c_str(), 0);
      throw Failure(base / relative, std::string("cannot write: ") + std::strerror(error));
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  ::fsync(file.get());
  file.Reset();
  // rename replaces a symlink at the destination; it never writes through it.
  if (::renameat(dir.get(), tmp.c_str(), dir.get(), name.c_str()) != 0) {
    int error = errno;
    ::unlinkat(dir.get(), tmp.c_str(), 0);
    throw Failure(base / relative, std::string("cannot write: ") + std::strerror(error));
  }
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
  if (rel.empty() || *rel.begin() == "..") throw Failure(path, "is outside the run directory " + path_.string());
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
