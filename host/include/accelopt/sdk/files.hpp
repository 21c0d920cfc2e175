// accelopt/sdk/files.hpp - checked, atomic file writes for plugin stages.
//
// A stage's files are read by later stages, by `--resume` and by people while
// the run goes on; a crash or a full disk must not leave half a file behind,
// and a failed write must fail the stage instead of passing silently (an
// unchecked std::ofstream does both). WriteFile writes a temporary file next
// to the target, flushes it to disk and renames it over the target.
//
// Below a run directory (every stage's `run_dir`, registered by RunStage in
// plugin_sdk.hpp), WriteFile, AppendFile and RemoveAll never follow a
// symbolic link: the run directory may come from someone else (a resumed or
// shared run), and a link planted at `optimize/records.jsonl` or at a folder
// on the way would redirect the write or the delete (accelopt/sdk/nofollow.hpp).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "accelopt/sdk/failure.hpp"
#include "accelopt/sdk/nofollow.hpp"

namespace accelopt::sdk {

namespace files_detail {
inline std::mutex& RootsMutex() {
  static std::mutex mutex;
  return mutex;
}
inline std::vector<std::filesystem::path>& Roots() {
  static std::vector<std::filesystem::path> roots;
  return roots;
}
inline std::filesystem::path Normal(const std::filesystem::path& path) {
  std::filesystem::path normal = std::filesystem::absolute(path).lexically_normal();
  if (normal.filename().empty() && normal.has_parent_path() && normal != normal.root_path()) normal = normal.parent_path();
  return normal;
}
}  // namespace files_detail

/// Registers `run_dir` as a run directory: files below it are written, appended
/// and removed without following symlinks. RunStage calls it with every
/// stage's run_dir; plugins need not. Keeps the 64 most recent.
inline void AddRunRoot(const std::filesystem::path& run_dir) {
  if (run_dir.empty()) return;
  std::filesystem::path root = files_detail::Normal(run_dir);
  std::lock_guard<std::mutex> lock(files_detail::RootsMutex());
  auto& roots = files_detail::Roots();
  for (const auto& known : roots) {
    if (known == root) return;
  }
  if (roots.size() >= 64) roots.erase(roots.begin());
  roots.push_back(std::move(root));
}

/// {run directory, path relative to it} when `path` lies below a registered run
/// directory (the innermost), else nullopt.
inline std::optional<std::pair<std::filesystem::path, std::filesystem::path>> SplitRunPath(
    const std::filesystem::path& path) {
  const std::filesystem::path full = files_detail::Normal(path);
  std::lock_guard<std::mutex> lock(files_detail::RootsMutex());
  std::optional<std::pair<std::filesystem::path, std::filesystem::path>> found;
  for (const auto& root : files_detail::Roots()) {
    std::filesystem::path rel = full.lexically_relative(root);
    if (rel.empty() || rel == "." || *rel.begin() == "..") continue;
    if (!found || root.string().size() > found->first.string().size()) found = std::make_pair(root, rel);
  }
  return found;
}

/// StageFailure{io_error} for a failed operation on `path`.
inline StageFailure IoFailure(const std::string& what, const std::filesystem::path& path, const std::string& why) {
  return StageFailure("io_error", "cannot " + what + " " + path.string() + ": " + why, {{"path", path.string()}});
}

/// The whole file as bytes. Throws StageFailure{io_error} naming the path when it
/// cannot be opened or read.
inline std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoFailure("read", path, std::strerror(errno));
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) throw IoFailure("read", path, "read error");
  return out.str();
}

/// Writes `content` to `path` atomically: readers see the old file or the whole
/// new one, never a part. Parent folders are created. The temporary file
/// (`<path>.tmp.XXXXXX`, unique per call, so concurrent writers of one path do not
/// collide) is removed on failure. Throws StageFailure{kind "io_error", details
/// {"path", "errno"}} when a folder cannot be created or a write, flush, close or
/// rename fails (disk full, permissions, ...).
inline void WriteFile(const std::filesystem::path& path, std::string_view content) {
  if (auto inside = SplitRunPath(path)) {
    try {
      nofollow::WriteAtomic(inside->first, inside->second, content);
    } catch (const std::runtime_error& error) {
      throw IoFailure("write", path, error.what());
    }
    return;
  }
  auto fail = [&](const std::string& what, int error) {
    throw StageFailure("io_error", "cannot write " + path.string() + ": " + what + ": " + std::strerror(error),
                       {{"path", path.string()}, {"errno", error}});
  };
  if (path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) fail("cannot create its folder", ec.value());
  }
  std::string tmp = path.string() + ".tmp.XXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) fail("cannot create a temporary file", errno);
  auto abandon = [&](const std::string& what, int error) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(what, error);
  };
  const char* data = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      abandon("write failed", errno);
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) abandon("chmod failed", errno);  // mkostemp creates 0600
  if (::fsync(fd) != 0) abandon("fsync failed", errno);
  if (::close(fd) != 0) {
    int error = errno;
    ::unlink(tmp.c_str());
    fail("close failed", error);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int error = errno;
    ::unlink(tmp.c_str());
    fail("rename failed", error);
  }
}

/// Appends `content` to `path` in one write (created 0644 with its folders when
/// missing). Below a run directory no symlink is followed (the file, or a
/// folder on the way). Throws StageFailure{io_error}.
inline void AppendFile(const std::filesystem::path& path, std::string_view content) {
  if (auto inside = SplitRunPath(path)) {
    try {
      nofollow::Append(inside->first, inside->second, content);
    } catch (const std::runtime_error& error) {
      throw IoFailure("append to", path, error.what());
    }
    return;
  }
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) throw IoFailure("append to", path, "cannot create its folder: " + ec.message());
  nofollow::Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (fd.get() < 0) throw IoFailure("append to", path, std::strerror(errno));
  if (int error = nofollow::WriteAll(fd.get(), content); error != 0) throw IoFailure("append to", path, std::strerror(error));
}

/// Removes `path` and everything below it; false when it did not exist. Below
/// a run directory no symlink is followed: a link is removed itself, never its
/// target, and a symlinked folder on the way is refused. Throws StageFailure{io_error}.
inline bool RemoveAll(const std::filesystem::path& path) {
  if (auto inside = SplitRunPath(path)) {
    try {
      return nofollow::Remove(inside->first, inside->second);
    } catch (const std::runtime_error& error) {
      throw IoFailure("remove", path, error.what());
    }
  }
  std::error_code ec;
  auto removed = std::filesystem::remove_all(path, ec);
  if (ec) throw IoFailure("remove", path, ec.message());
  return removed > 0;
}

/// WriteFile of `value` as JSON indented by `indent` spaces (-1: one line) and a
/// final newline. Invalid UTF-8 in strings becomes U+FFFD. Throws as WriteFile.
inline void WriteJsonFile(const std::filesystem::path& path, const nlohmann::json& value, int indent = 2) {
  WriteFile(path, value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace accelopt::sdk
